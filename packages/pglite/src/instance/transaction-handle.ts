/** `PGlite.transaction()` inside its turn: BEGIN, the handle its callback gets, COMMIT or ROLLBACK. */
import type { Backend } from '../engine/backend/backend.js'
import { ClosedError } from '../errors.js'
import { TransactionAbortedError } from '../transaction-aborted-error.js'
import type { ChannelListener } from '../notify.js'
import { abortedError } from '../query/abort.js'
import { ExecQueue } from '../query/queue.js'
import type { QueryRunner } from '../query/runner.js'
import { query as templateQuery } from '../query/template.js'
import type { Transaction } from '../transaction-types.js'
import { runExec, runQuery } from './query-calls.js'

/** What a transaction runs on: the engine of the instance's turn, and the instance's `listen`. */
export interface TransactionTurn {
  readonly backend: Backend
  readonly runner: QueryRunner
  listen(channel: string, callback: ChannelListener): (tx?: Transaction) => Promise<void>
}

export async function runTransaction<T>(
  turn: TransactionTurn,
  callback: (tx: Transaction) => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T> {
  const { backend, runner } = turn
  runner.exec('BEGIN', undefined)
  const txQueue = new ExecQueue()
  let closed = false
  const check = (): void => {
    if (closed) throw new ClosedError('Transaction is closed')
    if (signal?.aborted) throw abortedError(signal)
  }
  const tx: Transaction = {
    query: (sql, params, options) =>
      txQueue.run(() => {
        check()
        return runQuery(backend, runner, sql, params ?? [], options)
      }),
    sql: (strings, ...params) => {
      const { query, params: values } = templateQuery(strings, ...params)
      return tx.query(query, values)
    },
    exec: (sql, options) =>
      txQueue.run(() => {
        check()
        return runExec(backend, runner, sql, options)
      }),
    rollback: () =>
      txQueue.run(() => {
        check()
        runner.exec('ROLLBACK', undefined)
        closed = true
      }),
    listen: (channel, cb) =>
      txQueue.run(() => {
        check()
        return turn.listen(channel, cb)
      }),
    get closed() {
      return closed
    },
  }
  try {
    const result = await callback(tx)
    await txQueue.run(() => {
      if (closed) return
      closed = true
      const [commit] = runner.exec('COMMIT', undefined)
      if (commit?.command === 'ROLLBACK') {
        throw new TransactionAbortedError()
      }
    })
    return result
  } catch (err) {
    if (!closed) {
      closed = true
      if (!backend.deadError) runner.exec('ROLLBACK', undefined)
    }
    throw err
  }
}
