import { Backend, Frontend, TxStatus } from '@pgwasm/pglite/protocol'
import { forEachFrame, responseField } from '../wire/wire.js'

/*
 * A session advisory lock another client holds cannot be waited for inside
 * the one engine: the holder runs only after this statement ends. The
 * engine refuses it (55P03); for a lone simple Query sent outside a
 * transaction, the server then waits in its stead. The refused Query was
 * one implicit transaction that rolled back whole, so it runs again, whole,
 * once the lock it was refused is free (the multiplexer asks the engine who
 * holds it), and the client sees only the run that got it: what
 * PostgreSQL's own wait looks like from the client, with its timeouts and
 * its deadlock report.
 */

const LOCK_FUNCTION = /advisory_(xact_)?lock/i
/**
 * Transaction control inside the string could commit part of it before the
 * refusal, and that part must not run twice. Conservative: a CASE's END
 * also counts, and such a query gets the 55P03 instead of a wait.
 */
const TRANSACTION_CONTROL = /\b(begin|start|commit|end|rollback|abort|savepoint|release|prepare)\b/i

/** Whether `batch` is one Query message whose SQL calls an advisory lock function and controls no transaction. */
export function mayWaitForAdvisoryLock(batch: Uint8Array): boolean {
  if (batch.length < 6 || batch[0] !== Frontend.Query) return false
  const length = ((batch[1]! << 24) | (batch[2]! << 16) | (batch[3]! << 8) | batch[4]!) >>> 0
  if (length + 1 !== batch.length) return false
  // Most queries name no lock: a native byte search rules them out before any decoding.
  const bytes = Buffer.from(batch.buffer, batch.byteOffset + 5, batch.byteLength - 5)
  if (bytes.indexOf('advisory') < 0 && bytes.indexOf('ADVISORY') < 0 && bytes.indexOf('Advisory') < 0) return false
  const sql = bytes.toString('latin1')
  return LOCK_FUNCTION.test(sql) && !TRANSACTION_CONTROL.test(sql)
}

/**
 * `refused` (the key the engine last refused, `EngineLease.takeRefusedLock`)
 * when `reply`, the whole answer to such a Query, is that refusal (55P03)
 * with the session left idle; undefined for any other answer.
 */
export function busyLockKey(reply: Uint8Array, refused: string | undefined): string | undefined {
  if (refused === undefined) return undefined
  let busy = false
  let idle = false
  forEachFrame(reply, (type, start, end) => {
    if (type === Backend.ErrorResponse) busy = responseField(reply, start, end, 'C') === '55P03'
    else if (type === Backend.ReadyForQuery) idle = reply[start] === TxStatus.Idle
  })
  return busy && idle ? refused : undefined
}

/** A wait for an advisory lock that ended without it: PostgreSQL's error for why. */
export class LockWaitFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly detail?: string,
  ) {
    super(message)
  }
}

/** A waiting client, as the deadlock check sees it. */
export interface LockWaiter {
  readonly pid: number
  readonly key: string
}

/**
 * The deadlock `waiter` is in, as PostgreSQL's report words it (one line
 * per process), or undefined: `holders` tells who holds a key, `waiting`
 * who waits for what.
 */
export function deadlockOf(waiter: LockWaiter, holders: (key: string) => number[], waiting: ReadonlyMap<number, LockWaiter>): string | undefined {
  const path: LockWaiter[] = []
  const seen = new Set<number>()
  const visit = (w: LockWaiter): boolean => {
    if (seen.has(w.pid)) return false
    seen.add(w.pid)
    path.push(w)
    for (const pid of holders(w.key)) {
      if (pid === w.pid) continue
      if (pid === waiter.pid) return true
      const next = waiting.get(pid)
      if (next && visit(next)) return true
    }
    path.pop()
    return false
  }
  if (!visit(waiter)) return undefined
  return path
    .map((w, i) => `Process ${w.pid} waits for ExclusiveLock on advisory lock ${w.key}; blocked by process ${(path[i + 1] ?? waiter).pid}.`)
    .join('\n')
}
