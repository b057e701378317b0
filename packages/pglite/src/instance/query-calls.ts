/** One `query()` or `exec()` in its turn (the instance's or a transaction's): session timeouts first, `/dev/blob` around it. */
import type { Backend } from '../engine/backend/backend.js'
import { DatabaseError } from '../errors.js'
import type { QueryOptions, Results } from '../query/results.js'
import type { QueryRunner } from '../query/runner.js'
import { attachWrittenBlob, endBlob, feedBlob } from './dev-blob.js'

/**
 * Postgres ends a session whose transaction outlives
 * `idle_in_transaction_session_timeout` or `transaction_timeout`; ending
 * it here would close the instance. Instead the transaction is rolled
 * back and the call that finds it so rejects with the same SQLSTATE.
 */
function enforceTransactionTimeouts(backend: Backend, runner: QueryRunner): void {
  const expired = backend.expiredTransactionTimeout()
  if (!expired) return
  runner.exec('ROLLBACK', undefined)
  const what = expired.code === '25P03' ? 'it was idle for longer than' : 'it ran for longer than'
  throw new DatabaseError(`the transaction was rolled back: ${what} ${expired.setting} (${expired.ms} ms)`, {
    severity: 'ERROR',
    code: expired.code,
  })
}

export async function runQuery<T>(
  backend: Backend,
  runner: QueryRunner,
  sql: string,
  params: readonly unknown[],
  options: QueryOptions | undefined,
): Promise<Results<T>> {
  enforceTransactionTimeouts(backend, runner)
  if (options?.blob) await feedBlob(backend, options.blob)
  try {
    return attachWrittenBlob(backend, runner.query(sql, params, options)) as Results<T>
  } finally {
    endBlob(backend)
  }
}

export async function runExec(backend: Backend, runner: QueryRunner, sql: string, options: QueryOptions | undefined): Promise<Results[]> {
  enforceTransactionTimeouts(backend, runner)
  if (options?.blob) await feedBlob(backend, options.blob)
  try {
    const results = runner.exec(sql, options) as Results[]
    attachWrittenBlob(backend, results[results.length - 1]!)
    return results
  } finally {
    endBlob(backend)
  }
}
