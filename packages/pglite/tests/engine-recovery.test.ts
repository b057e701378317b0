// An engine death nobody foresaw (issue "the engine's boundary": "a directory
// database reopens itself"). No SQL we know of still kills the engine, so the
// tests kill it as an engine bug would: they overwrite its memory through
// `db.Module.HEAPU8` (PGlite's own public handle on it), and the next request
// traps on the garbage.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { ClosedError, EngineError, PGlite } from '../src/index.js'
import { rejection } from './helpers.js'

/** Fills the engine's memory past its first page with 0xff: the next request traps. */
function corruptEngine(db: PGlite): void {
  const heap = db.Module.HEAPU8
  heap.fill(0xff, 4096, Math.min(heap.length, 64 << 20))
}

async function failure(promise: Promise<unknown>): Promise<EngineError> {
  const err = await rejection(promise)
  expect(err).toBeInstanceOf(EngineError)
  return err as EngineError
}

describe('a directory database whose engine died', () => {
  it('starts the engine again on its directory: committed rows are kept, the open transaction is gone, and the instance goes on', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    await db.exec("create table t (id int primary key, note text); insert into t values (1, 'committed')")
    const died = db.transaction(async (tx) => {
      await tx.query("insert into t values (2, 'in the transaction')")
      corruptEngine(db)
      await tx.query('select 1')
    })
    const err = await failure(died)
    expect(err.code).toBe('ENGINE_ABORT')
    expect(err.reopened).toBe(true)
    expect(err.message).toMatch(/opened again from its directory .*every committed transaction is kept/)
    expect(db.closed).toBe(false)
    expect(db.isInTransaction()).toBe(false)
    expect((await db.query('select id, note from t order by id')).rows).toEqual([{ id: 1, note: 'committed' }])
    // Writes go on, and survive a clean close and reopen.
    await db.query("insert into t values (3, 'after')")
    await db.close()
    const again = await PGlite.create(dir)
    expect((await again.query<{ id: number }>('select id from t order by id')).rows.map((r) => r.id)).toEqual([1, 3])
    await again.close()
  })

  it('keeps listen() callbacks, the role it runs as, and array parsers across the new start', async () => {
    const dir = tempDir()
    const setup = await PGlite.create(dir)
    await setup.exec("create role app; create type mood as enum ('ok', 'sad'); create table m (v mood[]); grant all on m to app")
    await setup.close()
    const db = await PGlite.create(dir, { username: 'app' })
    const heard: string[] = []
    await db.listen('news', (payload) => heard.push(payload))
    corruptEngine(db)
    const err = await failure(db.query('select 1'))
    expect(err.reopened).toBe(true)
    expect((await db.query<{ u: string }>('select current_user as u')).rows).toEqual([{ u: 'app' }])
    await db.query('insert into m values ($1)', [['ok', 'sad']])
    expect((await db.query<{ v: string[] }>('select v from m')).rows).toEqual([{ v: ['ok', 'sad'] }])
    await db.query("select pg_notify('news', 'after the restart')")
    await new Promise((r) => setTimeout(r, 20))
    expect(heard).toEqual(['after the restart'])
    await db.close()
  })

  it('answers calls queued behind the failing one on the new engine', async () => {
    const db = await PGlite.create(tempDir())
    await db.exec('create table q (n int)')
    corruptEngine(db)
    const first = db.query('select 1')
    const queued = [db.query('insert into q values (1)'), db.query('select count(*)::int as n from q')]
    expect((await failure(first)).reopened).toBe(true)
    await queued[0]
    expect((await queued[1])!.rows).toEqual([{ n: 1 }])
    await db.close()
  })

  it('closes when the directory cannot be opened again, saying why, and lets go of the directory', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    await db.exec('create table t (a int)')
    // A damaged control file: the next start fails.
    const control = `${dir}/global/pg_control`
    const bytes = readFileSync(control)
    for (let i = 16; i < 64; i++) bytes[i] = bytes[i]! ^ 0x5a
    writeFileSync(control, bytes)
    corruptEngine(db)
    const err = await failure(db.query('select 1'))
    expect(err.reopened).toBe(false)
    expect(err.message).toMatch(/the instance is closed: starting the engine again on the data directory failed/)
    expect(db.closed).toBe(true)
    expect(await rejection(db.query('select 1'))).toBeInstanceOf(EngineError)
    await db.close()
    await db.close()
    expect(readdirSync(dir)).not.toContain('.pgwasm.lock')
  })
})

describe('an in-memory database whose engine died', () => {
  it('is closed (nothing of it is left to reopen), and says so', async () => {
    const db = await PGlite.create()
    corruptEngine(db)
    const err = await failure(db.query('select 1'))
    expect(err.code).toBe('ENGINE_ABORT')
    expect(err.reopened).toBeUndefined()
    expect(err.message).toMatch(/the instance is closed/)
    expect(db.closed).toBe(true)
    const later = await rejection(db.exec('select 1'))
    expect(later instanceof EngineError || later instanceof ClosedError).toBe(true)
    await db.close()
  })
})
