/** Shapes shared by the CLI, the suite children, the report and the test. */

export const SUITES = ['startup', 'rtt', 'speedtest', 'socket', 'prisma', 'live', 'browser', 'engine'] as const
export type SuiteName = (typeof SUITES)[number]

/** `ok`: measured; `skipped`: an anchor that could not run here; `not built`: our side does not exist yet; `failed`: it ran and threw. */
export type Status = 'ok' | 'skipped' | 'not built' | 'failed'

/** Rates (`queries/s`, `tps`: pgbench transactions per second) are better higher; every other unit lower. */
export const UNITS = ['ms', 'MB', 'queries/s', 'tps'] as const
export type Unit = (typeof UNITS)[number]

/** Whether a bigger median is better for `unit`, which flips how a ratio reads (ours/anchor above 1 is then a win). */
export function isHigherBetter(unit: Unit): boolean {
  return unit === 'queries/s' || unit === 'tps'
}

/** Statistics of one row's samples, computed by `summarize` in stats.ts. */
export interface Summary {
  n: number
  min: number
  max: number
  mean: number
  /** Mean without the lowest and highest 10% of samples, as PGlite's RTT benchmark reports. */
  trimmedMean: number
  p50: number
  p75: number
  p95: number
  p99: number
  sd: number
  /** Relative margin of error of the mean at 95%, in percent. */
  rme: number
}

export interface Row {
  case: string
  path: string
  side: 'ours' | 'anchor'
  unit: Unit
  status: Status
  reason?: string
  summary?: Summary
  /** For anchor rows: the ours path (same case) whose median is divided by this row's. */
  vs?: string
  /** ours median / this row's median; set by the CLI when both rows are ok. */
  ratio?: number
}

/** A named quotient of two rows' medians, computed in the same run. */
export interface KeyRatio {
  name: string
  numerator: { case: string; path: string }
  denominator: { case: string; path: string }
  value?: number
  reason?: string
}

export interface SuiteResult {
  suite: SuiteName
  status: 'ok' | 'not built' | 'failed'
  reason?: string
  durationMs: number
  /** Settings the suite actually used (sizes, iteration counts, translation notes). */
  settings: Record<string, unknown>
  notes: string[]
  rows: Row[]
  ratios: KeyRatio[]
}

export interface Environment {
  date: string
  cpu: string
  cores: number
  memoryGiB: number
  platform: string
  node: string
  gitSha: string | null
  versions: Record<string, string | null>
  nativePostgres: string | null
  settings: { scale: number; iterations: number | null; warmup: number | null; filter: string | null; native: string | null }
}

export interface BenchResult {
  environment: Environment
  suites: SuiteResult[]
}

/** What the CLI hands a suite child. */
export interface SuiteConfig {
  scale: number
  /** BENCH_ITERATIONS: timed samples per row (meaning per suite in README). */
  iterations: number | null
  /** BENCH_WARMUP: warm-up iterations per row. */
  warmup: number | null
  filter: string | null
  nativeUrl: string | null
  /** Why native rows are skipped when nativeUrl is null. */
  nativeReason: string
}
