// What the host does when Postgres raises an ERROR in the published build:
// its top-level longjmp exits with EXIT_LONGJMP (docs/engine.md), and the
// main loop's recovery is a call of its own.
import { isExitStatus, type PostgresModule } from '../emscripten.js'
import type { SessionGuards } from '../hooks/session-guards.js'

/** The patched top-level longjmp after an ERROR exits with this (docs/engine.md). */
export const EXIT_LONGJMP = 100
/** Error recovery passes in a row before an ERROR inside recovery is taken as the engine failing. */
const RECOVERY_PASSES = 4

/** Whether `thrown` is an ERROR's exit, which recovery handles. */
export function isErrorExit(thrown: unknown): boolean {
  return isExitStatus(thrown) && thrown.status === EXIT_LONGJMP
}

/**
 * Runs the main loop's error recovery. An ERROR raised inside it (out of
 * memory while it formats the report of an out-of-memory ERROR) jumps
 * back to the main loop's handler, as it does in a server's backend:
 * recovery runs again, and elog's recursion guard makes each pass's
 * report smaller (it resets ErrorContext). Past a few passes the engine
 * is left to die as before (the last throw goes to the caller).
 */
export function recoverFromError(mod: PostgresModule): void {
  for (let pass = 1; ; pass++) {
    const sp = mod.stackSave()
    try {
      mod._PostgresMainLongJmp()
      return
    } catch (e) {
      mod.stackRestore(sp)
      if (!isErrorExit(e) || pass >= RECOVERY_PASSES) throw e
    }
  }
}

/**
 * The JavaScript stack ran out inside the engine: deep recursion or
 * nesting that Postgres' own `max_stack_depth` check does not see, as it
 * measures the engine's stack in linear memory while most frames live on
 * the JavaScript stack. Outside a critical section the engine's state is
 * what an ERROR raised at that call would leave, so report Postgres' own
 * 54001 there and let the usual recovery run. Returns what the ERROR
 * threw, or `cause` if the engine cannot go on.
 */
export function stackDepthError(guards: SessionGuards, cause: unknown, topHandler: number): unknown {
  if (guards.inCriticalSection) return cause
  try {
    guards.raiseStackDepth(topHandler)
  } catch (raised) {
    return raised
  }
}
