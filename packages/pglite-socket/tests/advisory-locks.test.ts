import { describe, expect, it } from 'vitest'
import { useServedDatabase } from './helpers.js'

type Client = Awaited<ReturnType<ReturnType<typeof useServedDatabase>['connect']>>

async function one<T>(client: Client, sql: string): Promise<T> {
  const { rows } = await client.query(sql)
  return Object.values(rows[0] as Record<string, T>)[0]!
}

/** Polls `check` until it holds: a disconnect is cleaned up by the server after the client's `end()` returns. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`timed out waiting for ${what}`)
}

// Every client of the server runs on one backend session; these are the
// answers PostgreSQL gives one connection per client.
describe('client identities and advisory locks', () => {
  const served = useServedDatabase()

  it('gives each client its own pg_backend_pid(), the one its BackendKeyData carried', async () => {
    const a = await served.connect()
    const b = await served.connect()
    const pidA = await one<number>(a, 'select pg_backend_pid() as pid')
    const pidB = await one<number>(b, 'select pg_backend_pid() as pid')
    expect(pidA).not.toBe(pidB)
    expect(pidA).toBe((a as unknown as { processID: number }).processID)
    expect(pidB).toBe((b as unknown as { processID: number }).processID)
    // Each asks again after the other ran: the answer follows the client, not the last one served.
    expect(await one<number>(a, 'select pg_backend_pid() as pid')).toBe(pidA)
  })

  it('a session advisory lock of one client excludes another until it is unlocked (55P03 for a statement that cannot wait)', async () => {
    const a = await served.connect()
    const b = await served.connect()
    await a.query('select pg_advisory_lock(1001)')
    // Re-entrant for its holder, as in PostgreSQL.
    expect(await one<boolean>(a, 'select pg_try_advisory_lock(1001) as ok')).toBe(true)
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(1001) as ok')).toBe(false)
    // With a parameter, pg sends the extended protocol: refused rather than waited for.
    await expect(b.query('select pg_advisory_lock($1)', [1001])).rejects.toMatchObject({ code: '55P03' })
    // A query string that commits part of itself first is refused too: that part must not run twice.
    await expect(b.query('create table committed_first (v int); commit; select pg_advisory_lock(1001)')).rejects.toMatchObject({ code: '55P03' })
    expect(await one<string | null>(b, `select to_regclass('committed_first')::text as t`)).toBe('committed_first')
    // b's session is fine afterwards, and a transaction-level lock of the same key is refused too.
    await b.query('begin')
    expect(await one<boolean>(b, 'select pg_try_advisory_xact_lock(1001) as ok')).toBe(false)
    await b.query('commit')
    // Held twice: one unlock leaves it held.
    expect(await one<boolean>(a, 'select pg_advisory_unlock(1001) as ok')).toBe(true)
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(1001) as ok')).toBe(false)
    expect(await one<boolean>(a, 'select pg_advisory_unlock(1001) as ok')).toBe(true)
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(1001) as ok')).toBe(true)
    // a no longer holds it: its unlock is false, b's is true.
    expect(await one<boolean>(a, 'select pg_advisory_unlock(1001) as ok')).toBe(false)
    expect(await one<boolean>(b, 'select pg_advisory_unlock(1001) as ok')).toBe(true)
  })

  it('shares a shared lock, excludes an exclusive one, and keeps the int4 pair form apart from the bigint form', async () => {
    const a = await served.connect()
    const b = await served.connect()
    expect(await one<boolean>(a, 'select pg_try_advisory_lock_shared(2002) as ok')).toBe(true)
    expect(await one<boolean>(b, 'select pg_try_advisory_lock_shared(2002) as ok')).toBe(true)
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(2002) as ok')).toBe(false)
    await a.query('select pg_advisory_lock(0, 2002)')
    // (0, 2002) is another lock than 2002.
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(0, 2002) as ok')).toBe(false)
    expect(await one<boolean>(b, 'select pg_advisory_unlock_shared(2002) as ok')).toBe(true)
    await a.query('select pg_advisory_unlock_all()')
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(2002) as ok')).toBe(true)
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(0, 2002) as ok')).toBe(true)
    await b.query('select pg_advisory_unlock_all()')
  })

  it('releases the session advisory locks of a client that disconnects', async () => {
    const a = await served.connect()
    const b = await served.connect()
    await a.query('select pg_advisory_lock(3003), pg_advisory_lock_shared(3004)')
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(3003) as ok')).toBe(false)
    await a.end()
    await until(async () => one<boolean>(b, 'select pg_try_advisory_lock(3003) as ok'), "the departed client's lock to go")
    expect(await one<boolean>(b, 'select pg_try_advisory_lock(3004) as ok')).toBe(true)
  })

  it('makes a simple-protocol pg_advisory_lock() wait while another client holds it, as a migration lock does', async () => {
    const a = await served.connect()
    const b = await served.connect()
    await a.query('select pg_advisory_lock(72707369)')
    let settled = false
    const waiting = b.query('select pg_advisory_lock(72707369) as got').then((r) => {
      settled = true
      return r
    })
    // b waits: a keeps working meanwhile, and b's query has no answer yet.
    await a.query('create table if not exists migrated (v int)')
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(settled).toBe(false)
    await a.query('select pg_advisory_unlock(72707369)')
    await waiting
    expect(await one<string | null>(b, `select to_regclass('migrated')::text as t`)).toBe('migrated')
    // b holds it now.
    expect(await one<boolean>(a, 'select pg_try_advisory_lock(72707369) as ok')).toBe(false)
    await b.query('select pg_advisory_unlock(72707369)')
  })

  it('gives a waiting lock to its client when the holder disconnects, and a waiter that disconnects leaves nothing behind', async () => {
    const a = await served.connect()
    const b = await served.connect()
    const c = await served.connect()
    await a.query('select pg_advisory_lock(7007)')
    const bWaits = b.query('select pg_advisory_lock(7007)')
    const cWaits = c.query('select pg_advisory_lock(7007)').catch((err: unknown) => err)
    await new Promise((resolve) => setTimeout(resolve, 150))
    await c.end()
    await cWaits
    await a.end()
    await bWaits
    expect(await one<boolean>(b, 'select pg_advisory_unlock(7007) as ok')).toBe(true)
    expect(await one<boolean>(b, 'select pg_advisory_unlock(7007) as ok')).toBe(false)
  })

  it('waits for a lock an in-process caller holds, and gets it once that caller lets go', async () => {
    const a = await served.connect()
    await served.db.query('select pg_advisory_lock(8008)')
    const waiting = a.query('select pg_advisory_lock(8008)')
    await new Promise((resolve) => setTimeout(resolve, 150))
    await served.db.query('select pg_advisory_unlock(8008)')
    await waiting
    expect((await served.db.query<{ ok: boolean }>('select pg_try_advisory_lock(8008) as ok')).rows).toEqual([{ ok: false }])
    await a.query('select pg_advisory_unlock(8008)')
  })

  it('keeps in-process callers as one more client: their locks exclude socket clients', async () => {
    const a = await served.connect()
    await served.db.query('select pg_advisory_lock(4004)')
    expect(await one<boolean>(a, 'select pg_try_advisory_lock(4004) as ok')).toBe(false)
    expect((await served.db.query<{ ok: boolean }>('select pg_advisory_unlock(4004) as ok')).rows).toEqual([{ ok: true }])
    expect(await one<boolean>(a, 'select pg_try_advisory_lock(4004) as ok')).toBe(true)
    await a.query('select pg_advisory_unlock(4004)')
  })
})

describe('pg_terminate_backend and pg_cancel_backend between clients', () => {
  const served = useServedDatabase()

  it('ends the connection of the client whose pid is named, with FATAL 57P01, and the others carry on', async () => {
    const a = await served.connect()
    const b = await served.connect()
    await b.query('select pg_advisory_lock(5005)')
    const pidB = await one<number>(b, 'select pg_backend_pid() as pid')
    const ended = new Promise<{ code?: string }>((resolve) => b.on('error', (err: Error & { code?: string }) => resolve(err)))
    expect(await one<boolean>(a, `select pg_terminate_backend(${pidB}) as ok`)).toBe(true)
    expect((await ended).code).toBe('57P01')
    await expect(b.query('select 1')).rejects.toThrow()
    // Its locks went with it; a is unharmed.
    await until(async () => one<boolean>(a, 'select pg_try_advisory_lock(5005) as ok'), "the terminated client's lock to go")
    expect(await one<number>(a, 'select 40 + 2 as n')).toBe(42)
  })

  it('ends the calling client itself when it names its own pid: the statement fails with the FATAL, as on PostgreSQL', async () => {
    const c = await served.connect()
    const failed = await c.query('select pg_terminate_backend(pg_backend_pid())').then(
      () => undefined,
      (err: Error & { code?: string }) => err,
    )
    expect(failed?.code).toBe('57P01')
    await expect(c.query('select 1')).rejects.toThrow()
  })

  it('answers a cancel of another client with true and stops nothing; an unknown pid is no backend (false, as in PostgreSQL)', async () => {
    const a = await served.connect()
    const b = await served.connect()
    const pidB = await one<number>(b, 'select pg_backend_pid() as pid')
    expect(await one<boolean>(a, `select pg_cancel_backend(${pidB}) as ok`)).toBe(true)
    expect(await one<number>(b, 'select 1 as n')).toBe(1)
    expect(await one<boolean>(a, 'select pg_terminate_backend(999999) as ok')).toBe(false)
    expect(await one<boolean>(a, 'select pg_cancel_backend(999999) as ok')).toBe(false)
  })
})
