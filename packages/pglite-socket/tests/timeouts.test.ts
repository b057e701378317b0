/**
 * Session timeouts the server enforces per client: the engine never acts on
 * them (it would end the one backend every client shares), so the client
 * whose time runs out is rolled back and disconnected, as PostgreSQL would,
 * and nobody else notices.
 */
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import type pg from 'pg'
import { within } from '@pgwasm/test-support/async'
import { errorFields } from '@pgwasm/test-support/backend'
import { startupPacket } from '@pgwasm/test-support/frontend'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { pgClient, useServedDatabase, type TestClient } from './helpers.js'

/** The first error a client reports, whether on a query or as an 'error' event. */
function firstError(client: TestClient): Promise<Error & { code?: string; severity?: string }> {
  if (client.errors[0]) return Promise.resolve(client.errors[0])
  return once(client, 'error').then(([err]) => err as Error & { code?: string })
}

/** Runs inserts on each client until `stop()`; resolves with how many each ran. */
function keepBusy(clients: readonly pg.Client[], table: string): { stop: () => Promise<number[]> } {
  let stopping = false
  const counts = clients.map(() => 0)
  const loops = clients.map(async (client, i) => {
    while (!stopping) {
      await client.query(`insert into ${table} values ($1, $2)`, [i, counts[i]])
      counts[i]!++
    }
  })
  return {
    async stop() {
      stopping = true
      await Promise.all(loops)
      return counts
    },
  }
}

describe('idle_in_transaction_session_timeout', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table idle_work (client int, n int)'))

  it('ends only the client idle in its transaction, with FATAL 25P03, while 20 others run queries without an error', async () => {
    const idle = await served.connect()
    await idle.query('begin')
    await idle.query('insert into idle_work values (-1, 0)')
    await idle.query("set local idle_in_transaction_session_timeout = '300ms'")
    const ended = firstError(idle)

    const others = await Promise.all(Array.from({ length: 20 }, () => served.connect()))
    const busy = keepBusy(others, 'idle_work')
    const err = await within(ended, 20_000, 'the idle client to be ended')
    const counts = await busy.stop()

    expect(err).toMatchObject({ code: '25P03', severity: 'FATAL', message: 'terminating connection due to idle-in-transaction timeout' })
    for (const other of others) expect(other.errors).toEqual([])
    const { rows } = await served.db.query<{ client: number; n: number }>(
      'select client, count(*)::int as n from idle_work group by client order by client',
    )
    // The idle client's insert was rolled back; every other insert is there.
    expect(rows).toEqual(counts.map((n, client) => ({ client, n })))
    expect(counts.every((n) => n > 0)).toBe(true)
  })

  it('keeps a client that sets the timeout and then stays busy in its transaction', async () => {
    const client = await served.connect()
    await client.query('begin')
    await client.query("set local idle_in_transaction_session_timeout = '5s'")
    for (let i = 0; i < 20; i++) await client.query('select pg_sleep(0.01)')
    await client.query('commit')
    expect(client.errors).toEqual([])
  })
})

describe('the server default for idle transactions', () => {
  const served = useServedDatabase({ idleInTransactionTimeoutMs: 300 })

  it('ends a client idle in a transaction for idleInTransactionTimeoutMs when it set no timeout of its own', async () => {
    const idle = await served.connect()
    const ended = firstError(idle)
    await idle.query('begin')
    const err = await within(ended, 20_000, 'the idle client to be ended')
    expect(err).toMatchObject({ code: '25P03', severity: 'FATAL' })
    const other = await served.connect()
    expect((await other.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  })

  it('lets a client idle outside a transaction stay', async () => {
    const client = await served.connect()
    await client.query('select 1')
    // Longer than the default above, without being in a transaction.
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect((await client.query('select 2 as two')).rows).toEqual([{ two: 2 }])
    expect(client.errors).toEqual([])
  })
})

/** Waits for the client's FATAL 25P04; 15 s, not 5: a CI run with the engine build beside it once took longer, and how fast is not what this tests. */
function endedWithTransactionTimeout(client: TestClient): Promise<void> {
  return within(
    (async () => {
      while (!client.errors.some((e) => (e as Error & { code?: string }).code === '25P04')) await new Promise((resolve) => setTimeout(resolve, 20))
    })(),
    15_000,
    'the FATAL 25P04',
  )
}

describe('transaction_timeout', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table tx_work (client int, n int)'))

  it('stops an endless statement once its transaction_timeout has run out (57014), then ends the client with FATAL 25P04', async () => {
    const looping = await served.connect()
    await looping.query('begin')
    // Long enough that the loop has started when it runs out, on a loaded machine too; else the idle transaction is ended first.
    await looping.query("set local transaction_timeout = '1s'")
    await expect(within(looping.query('do $$ begin loop end loop; end $$'), 10_000, 'the loop to be stopped')).rejects.toMatchObject({ code: '57014' })
    await endedWithTransactionTimeout(looping)
    const other = await served.connect()
    expect((await other.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  })

  it('counts transaction_timeout from the start of the request that began the block, however long that request ran', async () => {
    const looping = await served.connect()
    // The block's first request itself takes 600 ms of its 1.5 s: the endless loop after it is stopped
    // 1.5 s after BEGIN came, and the client then ended, as PostgreSQL counts from the block's start.
    await looping.query("begin; set local transaction_timeout = '1500ms'; select pg_sleep(0.6)")
    await expect(within(looping.query('do $$ begin loop end loop; end $$'), 10_000, 'the loop to be stopped')).rejects.toMatchObject({ code: '57014' })
    await endedWithTransactionTimeout(looping)
  })

  it('ends a client whose transaction outlasts its transaction_timeout with FATAL 25P04, though it keeps sending queries', async () => {
    const long = await served.connect()
    await long.query('begin')
    await long.query('insert into tx_work values (-1, 0)')
    await long.query("set local transaction_timeout = '300ms'")
    const others = await Promise.all(Array.from({ length: 5 }, () => served.connect()))
    const busy = keepBusy(others, 'tx_work')
    let failure: (Error & { code?: string }) | undefined
    await within(
      (async () => {
        for (;;) {
          try {
            await long.query('select pg_sleep(0.02)')
          } catch (err) {
            failure = err as Error & { code?: string }
            return
          }
        }
      })(),
      20_000,
      'the long transaction to be ended',
    )
    const counts = await busy.stop()
    // The FATAL comes between two of its statements (one still running 100 ms past the time is
    // canceled first, 57014, then the FATAL follows).
    await within(
      (async () => {
        while (![failure, ...long.errors].some((e) => e?.code === '25P04')) await new Promise((resolve) => setTimeout(resolve, 20))
      })(),
      5_000,
      'the FATAL 25P04',
    )
    const codes = [failure, ...long.errors].map((e) => e?.code)
    expect(codes).toContain('25P04')
    for (const other of others) expect(other.errors).toEqual([])
    const { rows } = await served.db.query<{ n: number }>('select count(*)::int as n from tx_work where client = -1')
    expect(rows).toEqual([{ n: 0 }])
    const total = await served.db.query<{ n: number }>('select count(*)::int as n from tx_work')
    expect(total.rows).toEqual([{ n: counts.reduce((a, b) => a + b, 0) }])
  })
})

describe('idle_session_timeout', () => {
  const served = useServedDatabase()

  it('ends a client idle outside a transaction longer than idle_session_timeout with FATAL 57P05', async () => {
    const client = await served.connect()
    const ended = firstError(client)
    await client.query("set idle_session_timeout = '300ms'")
    const err = await within(ended, 20_000, 'the idle client to be ended')
    expect(err).toMatchObject({ code: '57P05', severity: 'FATAL', message: 'terminating connection due to idle-session timeout' })
    // The setting is the shared session's (a plain SET is): take it back.
    const other = await served.connect()
    await other.query('reset idle_session_timeout')
    expect((await other.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  })
})

describe('authentication timeout', () => {
  const served = useServedDatabase({ maxConnections: 1, authenticationTimeoutMs: 1_000, password: 'secret', authMethod: 'md5' })

  it('closes a connection that sends half a startup packet, freeing its connection slot for a good client', async () => {
    const accepted = once(served.server, 'connection')
    const stalled = new RawClient(served.port)
    await stalled.connected
    stalled.write(startupPacket().subarray(0, 12))
    await accepted
    // The one slot is taken while it stalls.
    await expect(pgClient(served.port, { password: 'secret' })).rejects.toMatchObject({ code: '53300' })
    await within(stalled.closed, 20_000, 'the stalled connection to be closed')
    const good = await served.connect({ password: 'secret' })
    expect((await good.query('select 1 as one')).rows).toEqual([{ one: 1 }])
    await good.end()
  })

  it('closes a connection that never answers the password request', async () => {
    const stalled = new RawClient(served.port)
    await stalled.connected
    stalled.write(startupPacket())
    const request = await stalled.next()
    expect(request?.type).toBe('R')
    await within(stalled.closed, 20_000, 'the stalled connection to be closed')
    const rest = await stalled.rest()
    expect(rest.filter((m) => m.type === 'E').map((m) => errorFields(m.body).C)).toEqual([])
    const good = await served.connect({ password: 'secret' })
    expect((await good.query('select 1 as one')).rows).toEqual([{ one: 1 }])
    // The one slot is free again for whatever runs next.
    await good.end()
  })
})

describe('statement_timeout', () => {
  const served = useServedDatabase()

  it("stops a client's long statement with 57014 under its own setting (startup parameter or SET), while a client without it runs the same statement to its end", async () => {
    const timed = await served.connect({ statement_timeout: 200 })
    const other = await served.connect()
    const started = performance.now()
    await expect(timed.query('select pg_sleep(5)')).rejects.toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' })
    expect(performance.now() - started).toBeLessThan(4000)
    // Still connected, and its next statement runs.
    expect((await timed.query('select 1 as one')).rows).toEqual([{ one: 1 }])
    // Its setting is its own: the other client sleeps past 200 ms.
    expect((await other.query('select pg_sleep(0.4)::text as slept')).rows).toEqual([{ slept: '' }])
    await other.query(`set statement_timeout = '100ms'`)
    await expect(other.query('select pg_sleep(5)')).rejects.toMatchObject({ code: '57014' })
    // The first client's setting is not the one the other just made.
    expect((await timed.query(`select current_setting('statement_timeout') as st`)).rows).toEqual([{ st: '200ms' }])
  })
})

describe('the server cap on one request (maxStatementMs)', () => {
  const served = useServedDatabase({ maxStatementMs: 300 })

  it("cancels a client's request that runs past it with 57014, whatever the client's statement_timeout, and the others get their turn", async () => {
    const hog = await served.connect()
    const other = await served.connect()
    await hog.query('set statement_timeout = 0')
    const started = performance.now()
    const hogged = hog.query('select pg_sleep(10)')
    // Queued behind it: runs as soon as the hog is canceled.
    const queued = other.query('select 1 as one')
    await expect(hogged).rejects.toMatchObject({ code: '57014', message: 'canceling statement due to user request' })
    expect((await queued).rows).toEqual([{ one: 1 }])
    expect(performance.now() - started).toBeLessThan(5000)
    // Both go on; a request under the cap is untouched, and so is the next one after a cancel.
    expect((await hog.query('select pg_sleep(0.05)::text as slept')).rows).toEqual([{ slept: '' }])
    expect((await other.query('select 2 as two')).rows).toEqual([{ two: 2 }])
  })

  it('leaves in-process callers of the instance without the cap', async () => {
    expect((await served.db.query<{ slept: string }>('select pg_sleep(0.5)::text as slept')).rows).toEqual([{ slept: '' }])
  })
})
