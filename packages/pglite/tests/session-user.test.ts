import { describe, expect, it } from 'vitest'
import { DatabaseError, EngineError, PGlite } from '../src/index.js'

async function code(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p
  } catch (err) {
    if (err instanceof DatabaseError || err instanceof EngineError) return err.code
    throw err
  }
  return undefined
}

// lockSessionUser: the one way to give SQL less than superuser rights here.
describe('lockSessionUser', () => {
  it('runs SQL as the role for good: RESET and DISCARD ALL come back to it, nothing makes it the superuser again', async () => {
    const db = await PGlite.create()
    await db.exec(`create role app login; grant all on schema public to app; create table secret (x int)`)
    await db.lockSessionUser('app')
    const who = async (): Promise<unknown> => (await db.query('select current_user as c, session_user as s')).rows[0]
    expect(await who()).toEqual({ c: 'app', s: 'app' })
    await db.exec('reset session authorization')
    await db.exec('discard all')
    await db.exec('reset all')
    expect(await who()).toEqual({ c: 'app', s: 'app' })
    expect(await code(db.exec('set session authorization postgres'))).toBe('22023')
    expect(await code(db.query(`select set_config('session_authorization', 'postgres', false)`))).toBe('22023')
    expect(await code(db.exec('set role postgres'))).toBe('42501')
    // What a superuser could do and this role cannot.
    for (const sql of [
      'select * from secret',
      `select pg_read_file('/pglite/data/postgresql.conf')`,
      `copy (select 1) to '/tmp/out'`,
      `select lo_export(lo_from_bytea(0, '\\x00'), '/tmp/x.so')`,
      `load '/tmp/x.so'`,
      `alter system set work_mem = '1MB'`,
      `create extension pageinspect`,
    ]) {
      expect(await code(db.exec(sql)), sql).toMatch(/^(42501|58P01|0A000)$/)
    }
    await db.exec('create table mine (x int); insert into mine values (1)')
    expect(await who()).toEqual({ c: 'app', s: 'app' })
    // A clone keeps the lock.
    const copy = await db.clone()
    expect((await copy.query('select session_user as s')).rows).toEqual([{ s: 'app' }])
    expect(await code(copy.exec('set session authorization postgres'))).toBe('22023')
    await copy.close()
    await db.close()
  })

  it('refuses a missing role, a superuser and a second role with BAD_ROLE, changing nothing', async () => {
    const db = await PGlite.create()
    expect(await code(db.lockSessionUser('nobody'))).toBe('BAD_ROLE')
    expect(await code(db.lockSessionUser('postgres'))).toBe('BAD_ROLE')
    await db.exec('create role a; create role b')
    await db.exec('begin')
    expect(await code(db.lockSessionUser('a'))).toBe('BAD_ROLE')
    await db.exec('rollback')
    expect((await db.query('select session_user as s')).rows).toEqual([{ s: 'postgres' }])
    await db.lockSessionUser('a')
    await db.lockSessionUser('a')
    expect(await code(db.lockSessionUser('b'))).toBe('BAD_ROLE')
    await expect(db.lockSessionUser('')).rejects.toBeInstanceOf(TypeError)
    await db.close()
  })
})
