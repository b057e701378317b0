import { nodeBuiltinIfAny } from '../node-builtin.js'

/**
 * V8 runs a wasm function first as baseline code (Liftoff) and compiles it
 * again with its optimizing compiler (TurboFan) once the function has spent
 * a "tiering budget" (roughly, bytes of code executed). Postgres is a 9 MB
 * module whose requests pass through thousands of functions; at Node 20's
 * default budget (1.8M) a new process spends its first seconds recompiling
 * many of them, and is slower meanwhile than without any tier-up. Measured
 * on the 2-core test machine, Node 20, a new process with a schema's saved
 * state:
 *
 * | work after the first create | 1.8M (default) | 18M | 180M |
 * | --- | --- | --- | --- |
 * | 10 resets + insert + count (a test file) | 250-355 ms | 175-177 ms | 166-192 ms |
 * | 300 of them | 1.8-2.3 s | 1.6-1.7 s | 1.4-1.6 s |
 * | COPY of 1M rows of 1 kB | 6.4-7.3 s | 5.7-6.1 s | 5.8-6.0 s |
 * | pgbench through the server, tps vs pglite-socket | 1.00x | 0.89-1.00x | 0.87-0.90x |
 *
 * 180M kept hot functions on baseline code too long for steady work
 * (pgbench); 18M is about what V8 itself chose later (Node 24: 13M).
 *
 * The budget is a V8 flag, so it is the whole process's: the engine raises
 * it once, before its first compile, unless the process was started with a
 * flag of its own about wasm tiering, or `PGWASM_WASM_TIERING_BUDGET` says
 * otherwise (`default`: leave V8's; a number: that budget). Only on the V8
 * lines it was measured on; another runtime or V8 line is left as it is.
 */
export const WASM_TIERING_BUDGET = 18_000_000

/** V8 major versions whose `--wasm-tiering-budget` was measured (Node 20: 11, Node 22: 12, Node 24: 13). */
const MEASURED_V8_MAJORS = new Set([11, 12, 13])

/** Flags by which a process already chose how its wasm tiers up. */
const OWN_TIERING_FLAG = /--(no-)?(wasm-tiering-budget|liftoff|liftoff-only|wasm-dynamic-tiering|wasm-tier-up)\b/

export interface TieringContext {
  readonly env: Readonly<Record<string, string | undefined>>
  readonly execArgv: readonly string[]
  readonly v8Version: string | undefined
  /** Set when the runtime is not Node itself (Bun, Deno), whose flags this does not know. */
  readonly otherRuntime: boolean
}

/**
 * The V8 flag to set for this process, or undefined to leave V8 as it is.
 * @throws RangeError for a `PGWASM_WASM_TIERING_BUDGET` that is neither `default` nor a positive integer.
 */
export function tieringFlag(ctx: TieringContext): string | undefined {
  const setting = ctx.env.PGWASM_WASM_TIERING_BUDGET?.trim()
  if (setting === 'default') return undefined
  let budget = WASM_TIERING_BUDGET
  if (setting !== undefined && setting !== '') {
    budget = Number(setting)
    if (!/^\d+$/.test(setting) || budget <= 0 || budget > 0x7fffffff) {
      throw new RangeError(`PGWASM_WASM_TIERING_BUDGET must be 'default' or a positive integer below 2^31, not ${JSON.stringify(setting)}`)
    }
  }
  if (ctx.otherRuntime) return undefined
  const major = Number(ctx.v8Version?.split('.')[0])
  if (!MEASURED_V8_MAJORS.has(major)) return undefined
  if ([...ctx.execArgv, ctx.env.NODE_OPTIONS ?? ''].some((arg) => OWN_TIERING_FLAG.test(arg))) return undefined
  return `--wasm-tiering-budget=${budget}`
}

let applied = false

/**
 * Sets the process's wasm tiering budget once (see above); call before
 * compiling the engine. Node only.
 * @throws RangeError for a bad `PGWASM_WASM_TIERING_BUDGET` (every call, until it is fixed).
 */
export function applyWasmTieringBudget(): void {
  if (applied) return
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown }
  const ctx: TieringContext = {
    env: process.env,
    execArgv: process.execArgv,
    v8Version: process.versions.v8,
    otherRuntime: runtime.Bun !== undefined || runtime.Deno !== undefined,
  }
  applied = true
  const flag = tieringFlag(ctx)
  if (flag !== undefined) nodeBuiltinIfAny<typeof import('node:v8')>('node:v8')?.setFlagsFromString(flag)
}
