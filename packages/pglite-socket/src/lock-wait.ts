import { Msg, forEachFrame, responseField } from './wire.js'

/*
 * A session advisory lock another client holds cannot be waited for inside
 * the one engine: the holder runs only after this statement ends. The
 * engine refuses it (55P03); for a lone simple Query sent outside a
 * transaction, the server then waits in its stead. The refused Query was
 * one implicit transaction that rolled back whole, so it runs again, whole,
 * once a lock is let go of, and the client sees only the run that got it:
 * what PostgreSQL's own wait looks like from the client.
 */

const MARKER = 'could not obtain advisory lock'
const LOCK_FUNCTION = /advisory_(xact_)?lock/i
/**
 * Transaction control inside the string could commit part of it before the
 * refusal, and that part must not run twice. Conservative: a CASE's END
 * also counts, and such a query gets the 55P03 instead of a wait.
 */
const TRANSACTION_CONTROL = /\b(begin|start|commit|end|rollback|abort|savepoint|release|prepare)\b/i

/** Whether `batch` is one Query message whose SQL calls an advisory lock function and controls no transaction. */
export function mayWaitForAdvisoryLock(batch: Uint8Array): boolean {
  if (batch.length < 6 || batch[0] !== Msg.Query) return false
  const length = ((batch[1]! << 24) | (batch[2]! << 16) | (batch[3]! << 8) | batch[4]!) >>> 0
  if (length + 1 !== batch.length) return false
  // Most queries name no lock: a native byte search rules them out before any decoding.
  const bytes = Buffer.from(batch.buffer, batch.byteOffset + 5, batch.byteLength - 5)
  if (bytes.indexOf('advisory') < 0 && bytes.indexOf('ADVISORY') < 0 && bytes.indexOf('Advisory') < 0) return false
  const sql = bytes.toString('latin1')
  return LOCK_FUNCTION.test(sql) && !TRANSACTION_CONTROL.test(sql)
}

/** Whether `reply`, the whole answer to such a Query, is the engine's refusal of a busy lock, the session left idle. */
export function refusedForBusyLock(reply: Uint8Array): boolean {
  let refused = false
  let idle = false
  forEachFrame(reply, (type, start, end) => {
    if (type === Msg.ErrorResponse) {
      refused = responseField(reply, start, end, 'C') === '55P03' && (responseField(reply, start, end, 'M') ?? '').startsWith(MARKER)
    } else if (type === Msg.ReadyForQuery) {
      idle = reply[start] === 0x49 /* I */
    }
  })
  return refused && idle
}
