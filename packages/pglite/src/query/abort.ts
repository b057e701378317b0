import type { Backend } from '../engine/backend.js'
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
export function stoppable<T>(signal: AbortSignal | undefined, run: (stopped: () => Promise<never> | undefined) => Promise<T>): Promise<T> {
  if (!signal) return run(() => undefined)
  if (signal.aborted) return Promise.reject(abortedError(signal))
  return new Promise<T>((resolve, reject) => {
    let started = false
    const onAbort = (): void => {
      if (!started) reject(abortedError(signal))
    }
    signal.addEventListener('abort', onAbort, { once: true })
    run(() => {
      if (signal.aborted) return Promise.reject(abortedError(signal))
      started = true
      return undefined
    })
      .then(resolve, reject)
      .finally(() => signal.removeEventListener('abort', onAbort))
  })
}

/**
 * Runs `job` with the engine asked, where it polls (engine/alarms.ts),
 * whether `signal` was aborted: an abort cancels the running statement.
 */
export async function whileNotAborted<T>(backend: Backend, signal: AbortSignal | undefined, job: () => Promise<T>): Promise<T> {
  if (!signal) return job()
  const before = backend.stopWhen
  backend.stopWhen = before ? () => signal.aborted || before() : () => signal.aborted
  try {
    return await job()
  } finally {
    backend.stopWhen = before
  }
}
