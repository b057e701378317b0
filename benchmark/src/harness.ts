import { Bench } from 'tinybench'
import { summarize } from './stats.js'
import type { KeyRatio, Row, Status, SuiteConfig, SuiteName, Unit } from './types.js'

export function formatValue(v: number, unit: Unit): string {
  // Two decimals below 10 MB: a first visit's 3.76 MB against a 4 MB budget.
  if (unit === 'MB') return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} MB`
  if (unit === 'queries/s') return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} q/s`
  if (unit === 'tps') return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} tps`
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
      `${row.case} | ${row.path}: median ${formatValue(summary.p50, row.unit)}, p95 ${formatValue(summary.p95, row.unit)}, p99 ${formatValue(summary.p99, row.unit)} (n=${summary.n})`,
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

/**
 * One path of an interleaved case: either a function timed here, or a
 * `round` that times its own calls elsewhere (another process, e.g. on
 * another Node) with {@link timeRound} and hands back the samples, so a
 * path that cannot share this process still takes its turn in the rotation.
 */
export type TimedPath =
  | { path: string; fn: () => Promise<unknown> }
  | { path: string; round: (iterations: number, warmup: number) => Promise<number[]> }

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
 * One round of one path: a fresh tinybench `Bench` with a fixed iteration
 * count (time budget 0), so runs are reproducible and data-mutating cases
 * know how often they run. Returns the latency samples in ms.
 * @throws the task's error, or when tinybench reports it did not complete.
 */
export async function timeRound(name: string, fn: () => Promise<unknown>, iterations: number, warmup: number): Promise<number[]> {
  const bench = new Bench({
    time: 0,
    iterations,
    warmup: warmup > 0,
    warmupIterations: warmup,
    warmupTime: 0,
    retainSamples: true,
    throws: true,
  })
  bench.add(name, fn, { async: true })
  await bench.run()
  const result = bench.tasks[0]!.result
  if (result.state !== 'completed') throw new Error(`tinybench task ended ${result.state}`)
  return [...(result.latency.samples ?? [])]
}

/**
 * Times every path with tinybench in rounds, rotating the order each round,
 * so machine drift (thermal, GC, other load) lands on all paths alike.
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
      try {
        const samples = 'fn' in p ? await timeRound(p.path, p.fn, perRound, warmPerRound) : await p.round(perRound, warmPerRound)
        acc!.push(...samples)
      } catch (err) {
        out.set(p.path, err instanceof Error ? err : new Error(String(err)))
      }
    }
  }
  return out
}

/**
 * The promise, or a rejection naming `what` once `ms` pass: a server that
 * stops answering fails its rows instead of holding the suite.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new Error(`${what}: no answer within ${ms / 1000} s`)), ms)
  })
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer))
}

export function errorText(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err)
  return msg.split('\n')[0]!.slice(0, 200)
}

/** Kills a process started with `detached: true` and everything in its group (servers, browsers it started). */
export function killGroup(pid: number | undefined): void {
  if (pid === undefined) return
  try {
    process.kill(-pid, 'SIGKILL')
  } catch {
    // already gone
  }
}
