import type { RaisedError } from '../hooks/session-guards.js'

/**
 * Waits that nothing can end.
 *
 * Postgres waits for a lock another backend holds in `WaitLatch` with no
 * timeout: a signal (a timeout, a cancel, the holder's release) sets the
 * latch and ends the wait. This engine is one backend, with no other
 * process to release anything and no signal between two calls out to the
 * host, and the build's WaitLatch never blocks: it spins. Only a prepared
 * transaction can hold a lock against the backend here (`PREPARE
 * TRANSACTION` keeps its locks until `COMMIT PREPARED` or `ROLLBACK
 * PREPARED`, which only this backend could run), so a conflicting write
 * spun forever, deaf to cancels and timeouts, and froze every caller.
 *
 * The engine's WaitLatch notes such a wait in two exported globals and
 * calls the host (interrupt-polls.ts) before it starts. By then due alarms
 * and cancels have been delivered (alarms.ts): if one set the latch, the
 * wait returns at once and Postgres acts on it as usual. Otherwise the wait
 * could never end, and the backend raises {@link untimedWaitError} there
 * instead, at the same point where a cancel would have ended it (the lock
 * is released from the wait queue by the usual abort).
 */

/** The exported global holding the wait event of a wait about to start with no timeout (bit 31 set, so never 0). */
export const UNTIMED_WAIT_EXPORT = 'pgwasm_untimed_wait'
/** The exported global holding the address of the latch that wait is for. */
export const UNTIMED_WAIT_LATCH_EXPORT = 'pgwasm_untimed_wait_latch'

/** The wait event class of heavyweight locks (`PG_WAIT_LOCK` in Postgres' `wait_classes.h`). */
const PG_WAIT_LOCK = 0x03000000
const CLASS_MASK = 0xff000000

/** The ERROR raised where a wait with no timeout could never end (`event`: its wait event). */
export function untimedWaitError(event: number): RaisedError {
  if ((event & CLASS_MASK) === PG_WAIT_LOCK) {
    return {
      code: '55P03',
      message: 'could not obtain lock: a prepared transaction holds it',
      hint: 'COMMIT PREPARED or ROLLBACK PREPARED that transaction first (pg_prepared_xacts lists them): this engine runs a single backend, which cannot wait for a lock that only it could release.',
    }
  }
  return {
    code: '57014',
    message: `canceling statement: it waits (wait event 0x${(event >>> 0).toString(16)}) for something no other backend exists to do`,
    hint: 'This engine runs a single backend: a wait that only another process could end would never end.',
  }
}
