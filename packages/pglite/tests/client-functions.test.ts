import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite, type Notice } from '../src/index.js'

// pg_backend_pid() and the advisory locks answer per server client
// (client-functions.ts); for in-process callers they keep PostgreSQL's
// answers for one session. The socket package tests the clients' side.
describe('advisory locks and pg_backend_pid() in process', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
  })
  afterAll(() => db.close())

  const one = async <T>(sql: string): Promise<T> => Object.values((await db.query<Record<string, T>>(sql)).rows[0]!)[0]!

  it('counts re-entrant session locks, and warns as PostgreSQL does on unlocking one not held', async () => {
    await db.query('select pg_advisory_lock(9007199254740993)')
    expect(await one<boolean>('select pg_try_advisory_lock(9007199254740993)')).toBe(true)
    expect(await one<boolean>('select pg_advisory_unlock(9007199254740993)')).toBe(true)
    expect(await one<boolean>('select pg_advisory_unlock(9007199254740993)')).toBe(true)
    const notices: Notice[] = []
    const { rows } = await db.query<{ ok: boolean }>('select pg_advisory_unlock(9007199254740993) as ok', [], { onNotice: (n) => notices.push(n) })
    expect(rows).toEqual([{ ok: false }])
    expect(notices.map((n) => [n.severity, n.message])).toEqual([['WARNING', "you don't own a lock of type ExclusiveLock"]])
  })

  it('tells 2^53 + 1 from 2^53 (a bigint key is read whole) and the int4 pair form from the bigint form', async () => {
    await db.query('select pg_advisory_lock(9007199254740993)')
    expect(await one<boolean>('select pg_advisory_unlock(9007199254740992)')).toBe(false)
    expect(await one<boolean>('select pg_advisory_unlock(0, 1)')).toBe(false)
    await db.query('select pg_advisory_lock(0, 1)')
    expect(await one<boolean>('select pg_advisory_unlock(1)')).toBe(false)
    await db.query('select pg_advisory_unlock_all()')
    expect(await one<boolean>('select pg_advisory_unlock(9007199254740993)')).toBe(false)
    expect(await one<boolean>('select pg_advisory_unlock(0, 1)')).toBe(false)
  })

  it('keeps transaction-level locks PostgreSQL\'s own: listed in pg_locks and gone at commit', async () => {
    await db.transaction(async (tx) => {
      await tx.query('select pg_advisory_xact_lock(77)')
      expect((await tx.query(`select count(*)::int as n from pg_locks where locktype = 'advisory'`)).rows).toEqual([{ n: 1 }])
    })
    expect(await one<number>(`select count(*)::int as n from pg_locks where locktype = 'advisory'`)).toBe(0)
  })

  it('answers pg_backend_pid() with the session\'s own pid in process, the same every time', async () => {
    const pid = await one<number>('select pg_backend_pid()')
    expect(pid).toBeGreaterThan(0)
    expect(await one<number>('select pg_backend_pid()')).toBe(pid)
  })
})

describe('pg_stat_activity as a server reports it (EngineLease.reportActivity)', () => {
  it("lists the reported rows, one by pid, with the engine session's user, and the engine's own row again once cleared", async () => {
    const db = await PGlite.create()
    try {
      const start = Date.parse('2026-11-28T01:00:00Z')
      const lease = await db.lease()
      lease.reportActivity(() => [
        { pid: 1000, applicationName: 'app-a', state: 'idle', query: 'select 1', backendStart: start, clientAddr: '127.0.0.1', clientPort: 5555 },
        { pid: 1001, applicationName: 'app-b', state: 'active', query: 'x'.repeat(2000), backendStart: start, queryStart: start + 1000, waitEventType: 'IPC', waitEvent: 'EngineHeldByAnotherClient' },
      ])
      lease.release()
      const { rows } = await db.query<Record<string, unknown>>(
        `select pid, usename, application_name, state, length(query) as query_bytes, wait_event_type, wait_event, client_addr::text as client_addr,
           client_port, backend_start, query_start, backend_type, datname from pg_stat_activity order by pid`,
      )
      expect(rows).toEqual([
        {
          pid: 1000, usename: 'postgres', application_name: 'app-a', state: 'idle', query_bytes: 8, wait_event_type: null, wait_event: null,
          client_addr: '127.0.0.1/32', client_port: 5555, backend_start: new Date(start), query_start: null, backend_type: 'client backend', datname: 'postgres',
        },
        {
          // Postgres keeps 1023 bytes of a query's text (track_activity_query_size).
          pid: 1001, usename: 'postgres', application_name: 'app-b', state: 'active', query_bytes: 1023, wait_event_type: 'IPC', wait_event: 'EngineHeldByAnotherClient',
          client_addr: null, client_port: null, backend_start: new Date(start), query_start: new Date(start + 1000), backend_type: 'client backend', datname: 'postgres',
        },
      ])
      expect((await db.query('select pid from pg_stat_get_activity(1001)')).rows).toEqual([{ pid: 1001 }])
      const again = await db.lease()
      again.reportActivity(undefined)
      again.release()
      expect((await db.query<{ backend_type: string }>('select backend_type from pg_stat_activity')).rows).toEqual([{ backend_type: 'standalone backend' }])
    } finally {
      await db.close()
    }
  })
})
