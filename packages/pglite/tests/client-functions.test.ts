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
