import type { Summary } from './types.js'

/**
 * Quantile of sorted samples with linear interpolation between closest
 * ranks, the definition tinybench uses for its p50/p75/p99, so merged
 * samples report the same statistics tinybench would.
 */
export function quantile(sorted: readonly number[], q: number): number {
  const pos = (sorted.length - 1) * q
  const lo = Math.floor(pos)
  const a = sorted[lo]!
  if (pos === lo) return a
  const b = sorted[lo + 1]!
  return a + (pos - lo) * (b - a)
}

/** Two-sided 95% Student t critical values by degrees of freedom (tail: normal). */
const T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042]

function tCritical(df: number): number {
  if (df < 1) return Number.NaN
  return T95[df - 1] ?? 1.96
}

/** The one statistics routine every suite uses, for tinybench samples and whole-workload timings alike. */
export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error('no samples to summarize')
  const sorted = [...samples].sort((a, b) => a - b)
  const n = sorted.length
  const mean = sorted.reduce((s, x) => s + x, 0) / n
  const variance = n > 1 ? sorted.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1) : 0
  const sd = Math.sqrt(variance)
  const cut = Math.floor(n * 0.1)
  const kept = sorted.slice(cut, n - cut)
  const trimmedMean = kept.reduce((s, x) => s + x, 0) / kept.length
  const moe = n > 1 ? (sd / Math.sqrt(n)) * tCritical(n - 1) : 0
  return {
    n,
    min: sorted[0]!,
    max: sorted[n - 1]!,
    mean,
    trimmedMean,
    p50: quantile(sorted, 0.5),
    p75: quantile(sorted, 0.75),
    p95: quantile(sorted, 0.95),
    p99: quantile(sorted, 0.99),
    sd,
    rme: mean === 0 ? 0 : (moe / Math.abs(mean)) * 100,
  }
}
