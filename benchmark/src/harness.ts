import { Bench } from 'tinybench'
import { summarize } from './stats.js'
import type { KeyRatio, Row, Status, SuiteConfig, SuiteName, Unit } from './types.js'

export function formatValue(v: number, unit: Unit): string {
  if (unit === 'MB') return `${v.toFixed(0)} MB`
  if (unit === 'queries/s') return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} q/s`
  if (v >= 1000) return `${(v / 1000).toFixed(2)} s`
  if (v >= 10) return `${v.toFixed(1)} ms`
  if (v >= 1) return `${v.toFixed(2)} ms`
  return `${v.toFixed(3)} ms`
}

/** Collects a suite's rows in the child process and reports progress on stderr. */
export class SuiteRun {
  readonly rows: Row[] = []
  readonly notes: string[] = []
  readonly ratios: KeyRatio[] = []
  readonly settings: Record<string, unknown> = {}
  readonly #filter: string | null

  constructor(
    readonly suite: SuiteName,
    readonly config: SuiteConfig,
  ) {
    this.#filter = config.filter?.toLowerCase() ?? null
  }

  /** `--filter` narrows by case name (substring, case-insensitive). */
  wants(caseName: string): boolean {
    return this.#filter === null || caseName.toLowerCase().includes(this.#filter)
  }

  progress(text: string): void {
    process.stderr.write(`[${this.suite}] ${text}\n`)
  }

  add(row: Omit<Row, 'status' | 'summary'> & { samples: readonly number[] }): Row {
    const { samples, ...rest } = row
    const bad = samples.find((s) => !Number.isFinite(s) || s < 0)
    if (samples.length === 0 || bad !== undefined) {
      return this.mark({ ...rest, status: 'failed', reason: samples.length === 0 ? 'no samples' : `bad sample ${bad}` })
    }
    const summary = summarize(samples)
    const full: Row = { ...rest, status: 'ok', summary }
    this.rows.push(full)
    this.progress(
      `${row.case} | ${row.path}: median ${formatValue(summary.p50, row.unit)}, p95 ${formatValue(summary.p95, row.unit)} (n=${summary.n})`,
    )
    return full
  }

  mark(row: Omit<Row, 'summary'> & { status: Exclude<Status, 'ok'>; reason: string }): Row {
    this.rows.push(row)
    this.progress(`${row.case} | ${row.path}: ${row.status} (${row.reason})`)
    return row
  }

  ratio(name: string, numerator: { case: string; path: string }, denominator: { case: string; path: string }): void {
    this.ratios.push({ name, numerator, denominator })
  }
}

export interface TimedPath {
  path: string
  fn: () => Promise<unknown>
}

export interface InterleaveOptions {
  /** Timed iterations per path, spread over the rounds. */
  iterations: number
  /** Warm-up iterations per path, spread over the rounds (each round warms up again after the switch). */
  warmup: number
  rounds: number
}

/** How many times each path's function is called in total (for pre-sizing data, e.g. rows to delete). */
export function totalCalls(o: InterleaveOptions): number {
  const rounds = Math.max(1, Math.min(o.rounds, o.iterations))
  return rounds * (Math.ceil(o.iterations / rounds) + Math.ceil(o.warmup / rounds))
}

/**
 * Times every path with tinybench in rounds, rotating the order each round,
 * so machine drift (thermal, GC, other load) lands on all paths alike. Each
 * round is a fresh Bench with a fixed iteration count (time budget 0), so
 * runs are reproducible and data-mutating cases know how often they run.
 * Returns the merged latency samples (ms) per path, or the error it threw.
 */
export async function timeInterleaved(paths: readonly TimedPath[], o: InterleaveOptions): Promise<Map<string, number[] | Error>> {
  const rounds = Math.max(1, Math.min(o.rounds, o.iterations))
  const perRound = Math.ceil(o.iterations / rounds)
  const warmPerRound = Math.ceil(o.warmup / rounds)
  const out = new Map<string, number[] | Error>(paths.map((p) => [p.path, []]))
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < paths.length; k++) {
      const p = paths[(k + r) % paths.length]!
      const acc = out.get(p.path)
      if (acc instanceof Error) continue
      const bench = new Bench({
        time: 0,
        iterations: perRound,
        warmup: warmPerRound > 0,
        warmupIterations: warmPerRound,
        warmupTime: 0,
        retainSamples: true,
        throws: true,
      })
      bench.add(p.path, p.fn, { async: true })
      try {
        await bench.run()
        const result = bench.tasks[0]!.result
        if (result.state !== 'completed') throw new Error(`tinybench task ended ${result.state}`)
        acc!.push(...(result.latency.samples ?? []))
      } catch (err) {
        out.set(p.path, err instanceof Error ? err : new Error(String(err)))
      }
    }
  }
  return out
}

export function errorText(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err)
  return msg.split('\n')[0]!.slice(0, 200)
}
