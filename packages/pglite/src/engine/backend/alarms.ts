import type { ModuleControl } from './module.js'
import { UNTIMED_WAIT_EXPORT, UNTIMED_WAIT_LATCH_EXPORT } from './untimed-waits.js'

/** `which` of the real-time interval timer (`ITIMER_REAL`), the one Postgres' timeout.c uses. */
const ITIMER_REAL = 0

/**
 * Imports the engine calls while a statement works: clock reads (`pg_sleep`
 * polls the clock), file reads and writes (scans past the buffer pool,
 * sorts, hashes and spills to temporary files).
 */
const CALLED_WHILE_WORKING: Readonly<Record<string, readonly string[]>> = {
  wasi_snapshot_preview1: ['clock_time_get', 'fd_pread', 'fd_pwrite', 'fd_read', 'fd_write'],
  env: ['emscripten_date_now'],
}

/**
 * The same calls out also end a request that runs past a time limit the
 * host set (`control.cancelAt`), or one the host says is to stop when asked
 * (`control.pollAt`: a server whose client sent a CancelRequest or left), as
 * a CancelRequest would on a server: Postgres' `QueryCancelPending` is set,
 * and the next interrupt check raises 57014 "canceling statement due to
 * user request".
 *
 * Postgres arms `statement_timeout` and `lock_timeout` on one interval
 * timer, and no JavaScript timer can fire while a request runs to its end
 * synchronously. So a due alarm is delivered at the next call the engine
 * makes out to JavaScript, before that call: Postgres' own SIGALRM handler
 * runs as if the signal had interrupted that system call, and the statement
 * fails with 57014 "canceling statement due to statement timeout" at its
 * next interrupt check. Whether an alarm may go off is the backend's to say
 * (`control.mayDeliverAlarm`): never between requests, and never once a
 * `transaction_timeout`, which would end the session, may be due. A
 * statement that never calls out is reached through the interrupt polls
 * (interrupt-polls.ts).
 */
export function deliverAlarmsWhileWorking(imports: WebAssembly.Imports, control: ModuleControl): void {
  const deliver = (): void => {
    if (control.nextDue === Infinity && control.cancelAt === Infinity && control.pollAt === Infinity) return
    const now = performance.now()
    if (now >= control.cancelAt) {
      control.cancelAt = Infinity
      control.cancelStatement()
    }
    if (now >= control.pollAt) control.poll(now)
    if (now < control.nextDue || !control.mayDeliverAlarm()) return
    const fire = control.instance?.exports._emscripten_timeout as ((which: number, now: number) => void) | undefined
    if (!fire) return
    // Gone off: Postgres arms the timer again (setitimer) for what is still pending.
    control.arm(ITIMER_REAL, 0)
    fire(ITIMER_REAL, now)
  }
  // WaitLatch ticks (interrupt-polls.ts) before a wait with no timeout, having noted it in two exported globals.
  let waits: { instance: WebAssembly.Instance; event: WebAssembly.Global; latch: WebAssembly.Global } | undefined
  const untimedWait = (): void => {
    const instance = control.instance
    if (!instance) return
    if (waits?.instance !== instance) {
      const event = instance.exports[UNTIMED_WAIT_EXPORT]
      const latch = instance.exports[UNTIMED_WAIT_LATCH_EXPORT]
      if (!(event instanceof WebAssembly.Global) || !(latch instanceof WebAssembly.Global)) return
      waits = { instance, event, latch }
    }
    const noted = waits.event.value as number
    if (noted === 0) return
    waits.event.value = 0
    control.untimedWait(noted & 0x7fffffff, waits.latch.value as number)
  }
  for (const [space, names] of Object.entries(CALLED_WHILE_WORKING)) {
    const functions = imports[space] as Record<string, unknown> | undefined
    if (!functions) continue
    for (const name of names) {
      const original = functions[name]
      if (typeof original !== 'function') continue
      const clock = space === 'env' && name === 'emscripten_date_now'
      functions[name] = (...args: unknown[]): unknown => {
        deliver()
        if (clock) untimedWait()
        return (original as (...a: unknown[]) => unknown)(...args)
      }
    }
  }
}
