import type { Backend } from '../engine/backend/backend.js'
import { DatabaseError } from '../errors.js'

/** Options of `PGlite.transaction`. */
export interface TransactionOptions {
  /**
   * Stops the transaction when aborted: the statement running is canceled
   * (57014), later calls on the transaction reject, and it rolls back. See
   * `QueryOptions.signal`.
   */
  signal?: AbortSignal
}

/**
 * Signals whose abort comes from another thread: a word of shared memory
 * that thread sets (a worker's client, worker/options.ts). Nothing on this
 * thread can deliver it as an event while the engine runs, so it is read
 * where the engine polls and before a call's turn.
 */
const flagged = new WeakMap<AbortSignal, () => void>()

/** A signal that aborts once `flag[0]` is set, as read where the engine polls. */
export function signalOfFlag(flag: Int32Array): AbortSignal {
  const controller = new AbortController()
  flagged.set(controller.signal, () => {
    if (Atomics.load(flag, 0) !== 0) controller.abort()
  })
  return controller.signal
}

function aborted(signal: AbortSignal): boolean {
  flagged.get(signal)?.()
  return signal.aborted
}

/** What a call stopped by its signal rejects with: what Postgres says for a CancelRequest. */
export function abortedError(signal: AbortSignal): DatabaseError {
  const error = new DatabaseError('canceling statement due to user request', { severity: 'ERROR', code: '57014' })
  Object.defineProperty(error, 'cause', { value: signal.reason, enumerable: false, configurable: true, writable: true })
  return error
}

/**
 * Runs a call that waits for its turn and may be stopped by `signal`:
 * aborted before its turn, the call rejects at once, and when its turn
 * comes `stopped()` gives the job a rejection to return instead of running.
 * Once it runs, the call ends as the engine ends it (57014 when canceled).
 */
export function stoppable<T>(signal: AbortSignal, run: (stopped: () => Promise<never> | undefined) => Promise<T>): Promise<T> {
  if (aborted(signal)) return Promise.reject(abortedError(signal))
  return new Promise<T>((resolve, reject) => {
    let started = false
    const onAbort = (): void => {
      if (!started) reject(abortedError(signal))
    }
    signal.addEventListener('abort', onAbort, { once: true })
    run(() => {
      if (aborted(signal)) return Promise.reject(abortedError(signal))
      started = true
      return undefined
    })
      .then(resolve, reject)
      .finally(() => signal.removeEventListener('abort', onAbort))
  })
}

/**
 * Runs `job` with the engine asked, where it polls (engine/backend/alarms.ts),
 * whether `signal` was aborted: an abort cancels the running statement.
 */
export async function whileNotAborted<T>(backend: Backend, signal: AbortSignal, job: () => Promise<T>): Promise<T> {
  const before = backend.stopWhen
  backend.stopWhen = before ? () => aborted(signal) || before() : () => aborted(signal)
  try {
    return await job()
  } finally {
    backend.stopWhen = before
  }
}
