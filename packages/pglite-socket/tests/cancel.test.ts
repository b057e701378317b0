import { describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { sendCancelRequest } from '@pgwasm/test-support/raw-client'
import { backendKey, useServedDatabase, type TestClient } from './helpers.js'

/*
 * CancelRequest (psql's Ctrl-C, libpq's PQcancel): a statement that waits
 * for the engine, behind another client's transaction or for an advisory
 * lock, fails with 57014 as PostgreSQL's canceled statement does, and its
 * client goes on (issue "no way to stop a statement": CancelRequest did
 * nothing). A running statement: cancel-running.test.ts.
 */
describe('CancelRequest', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table c (n int)'))

  /** Sends a CancelRequest for `client`, as libpq does. */
  async function cancel(client: TestClient, secret = backendKey(client).secret): Promise<void> {
    await sendCancelRequest(served.port, backendKey(client).processId, secret)
  }

  /** Resolves once `pending` has not settled for a while: the statement waits. */
  async function stillWaiting(pending: Promise<unknown>): Promise<void> {
    const settled = await Promise.race([pending.then(() => true, () => true), new Promise((r) => setTimeout(() => r(false), 200))])
    expect(settled, 'the statement should still be waiting').toBe(false)
  }

  it("fails a query queued behind another client's open transaction with 57014; the client goes on, and nothing of it ran", async () => {
    const holder = await served.connect()
    const waiter = await served.connect()
    await holder.query('begin')
    await holder.query('insert into c values (1)')
    const queued = waiter.query('insert into c values (2)')
    await stillWaiting(queued)
    await cancel(waiter)
    await expect(within(queued, 5000, 'the canceled query')).rejects.toMatchObject({ code: '57014', message: 'canceling statement due to user request' })
    await holder.query('commit')
    expect((await waiter.query('select n from c order by n')).rows).toEqual([{ n: 1 }])
    // The extended protocol too: Parse/Bind/Execute/Sync answered by one error.
    await holder.query('begin; select pg_current_xact_id()')
    const extended = waiter.query({ name: 'ins', text: 'insert into c values ($1)', values: [3] })
    await stillWaiting(extended)
    await cancel(waiter)
    await expect(within(extended, 5000, 'the canceled extended query')).rejects.toMatchObject({ code: '57014' })
    await holder.query('rollback')
    expect((await waiter.query({ name: 'ins', text: 'insert into c values ($1)', values: [4] })).rowCount).toBe(1)
    expect((await waiter.query('select n from c order by n')).rows).toEqual([{ n: 1 }, { n: 4 }])
  })

  it('fails a wait for an advisory lock with 57014, and the lock stays with its holder', async () => {
    const holder = await served.connect()
    const waiter = await served.connect()
    await holder.query('select pg_advisory_lock(77)')
    const waiting = waiter.query('select pg_advisory_lock(77)')
    await stillWaiting(waiting)
    await cancel(waiter)
    await expect(within(waiting, 5000, 'the canceled lock wait')).rejects.toMatchObject({ code: '57014' })
    expect((await waiter.query('select pg_try_advisory_lock(77) as got')).rows).toEqual([{ got: false }])
    await holder.query('select pg_advisory_unlock(77)')
    expect((await waiter.query('select pg_try_advisory_lock(77) as got')).rows).toEqual([{ got: true }])
    await waiter.query('select pg_advisory_unlock(77)')
  })

  it('ignores a CancelRequest with the wrong secret: the queued query runs when its turn comes', async () => {
    const holder = await served.connect()
    const waiter = await served.connect()
    // A block with a transaction id keeps the engine (a read-only one would let it go: transaction-parking.ts).
    await holder.query('begin; select pg_current_xact_id()')
    const queued = waiter.query('select 42 as n')
    await stillWaiting(queued)
    await cancel(waiter, ((waiter as unknown as { secretKey: number }).secretKey ^ 1) >>> 0)
    await stillWaiting(queued)
    await holder.query('commit')
    expect((await within(queued, 5000, 'the queued query')).rows).toEqual([{ n: 42 }])
  })
})
