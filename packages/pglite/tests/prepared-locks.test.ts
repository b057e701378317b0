import { rmSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { DatabaseError, PGlite } from '../src/index.js'
import { rejection } from './helpers.js'

/*
 * The attack (issue "hardening", item 1): a prepared transaction keeps its
 * locks, and a conflicting write waits for them. The engine is one backend:
 * nothing could ever release them while it waits, and its WaitLatch spun
 * without calling out, so the write hung forever, deaf to cancels, timeouts
 * and AbortSignals, with the Node event loop frozen. Now such a wait fails
 * at once with 55P03 (engine/backend/untimed-waits.ts) and the database goes on.
 */

const CONFLICTS: Readonly<Record<string, string>> = {
  'a plain insert': 'insert into lk values (1)',
  'an insert through an escaped name': 'insert into "lk" values (1)',
  'an insert through a Unicode-escaped name': 'insert into U&"\\006c\\006b" values (1)',
  'an insert run as dynamic SQL': `do $$ begin execute format('insert into %I values (1)', 'lk'); end $$`,
  "an insert in a function whose SET clause asks for a long lock_timeout": 'select put_one()',
  'an insert that skips conflicts (it must wait to learn whether there is one)': 'insert into lk values (1) on conflict do nothing',
}

async function lockFailure(promise: Promise<unknown>): Promise<DatabaseError> {
  const err = await rejection(promise)
  expect(err).toBeInstanceOf(DatabaseError)
  expect(err).toMatchObject({ code: '55P03', message: 'could not obtain lock: a prepared transaction holds it' })
  return err as DatabaseError
}

describe('a write that conflicts with a prepared transaction, in process', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create({ postgresqlConf: { max_prepared_transactions: 4 } })
    // Separate calls: one exec's statements run as one transaction, which PREPARE TRANSACTION would take with it.
    await db.exec('create table lk (id int primary key); create table other (n int)')
    await db.exec(`create function put_one() returns void language sql set lock_timeout = '60s' as $$ insert into lk values (1) $$`)
    await db.exec(`begin; insert into lk values (1); prepare transaction 'g'`)
  })
  afterAll(async () => {
    await db.close()
  })

  for (const [name, sql] of Object.entries(CONFLICTS)) {
    it(`fails ${name} at once with 55P03, and the database goes on`, async () => {
      // A timer set before the statement fires: the event loop was not held.
      let fired = false
      const timer = setTimeout(() => (fired = true), 20)
      const err = await lockFailure(db.query(sql))
      expect(err.hint).toMatch(/COMMIT PREPARED or ROLLBACK PREPARED/)
      await new Promise((resolve) => setTimeout(resolve, 30))
      clearTimeout(timer)
      expect(fired).toBe(true)
      expect((await db.query('select count(*)::int as n from lk')).rows).toEqual([{ n: 0 }])
      await db.query('insert into other values (1)')
      expect((await db.query('select gid from pg_prepared_xacts')).rows).toEqual([{ gid: 'g' }])
    })
  }

  it('fails at once inside a transaction block, which then rolls back as after any error', async () => {
    await db.exec('begin; insert into other values (2)')
    await lockFailure(db.query('insert into lk values (1)'))
    await expect(db.query('select 1')).rejects.toMatchObject({ code: '25P02' })
    await db.exec('rollback')
    expect((await db.query('select count(*)::int as n from other where n = 2')).rows).toEqual([{ n: 0 }])
  })

  it('fails at once whatever lock_timeout and statement_timeout say (no wait could end sooner)', async () => {
    await db.exec(`set lock_timeout = '30s'; set statement_timeout = '60s'`)
    try {
      await lockFailure(db.query('insert into lk values (1)'))
    } finally {
      await db.exec('reset lock_timeout; reset statement_timeout')
    }
  })

  it('fails a read of a table whose lock a prepared transaction holds', async () => {
    await db.exec('create table held (n int)')
    await db.exec(`begin; lock table held in access exclusive mode; prepare transaction 'h'`)
    await lockFailure(db.query('select * from held'))
    await lockFailure(db.query(`do $$ begin perform count(*) from "held"; end $$`))
    // A timed wait still runs its course.
    await db.query('select pg_sleep(0.01)')
    await db.exec(`rollback prepared 'h'`)
    expect((await db.query('select count(*)::int as n from held')).rows).toEqual([{ n: 0 }])
  })

  it('lets the prepared transaction end: COMMIT PREPARED, then the same write fails as a duplicate', async () => {
    await db.exec(`commit prepared 'g'`)
    expect((await db.query('select id from lk')).rows).toEqual([{ id: 1 }])
    await expect(db.query('insert into lk values (1)')).rejects.toMatchObject({ code: '23505' })
    await db.query('insert into lk values (2)')
  })
})

describe('a prepared transaction kept in a directory', () => {
  const dirs: string[] = []
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  it('still holds its locks after a reopen, and a conflicting write fails at once instead of hanging', async () => {
    const dir = tempDir()
    dirs.push(dir)
    const conf = { max_prepared_transactions: 4 }
    const first = await PGlite.create({ dataDir: dir, postgresqlConf: conf })
    await first.exec('create table lk (id int primary key)')
    await first.exec(`begin; insert into lk values (1); prepare transaction 'kept'`)
    await first.close()
    const second = await PGlite.create({ dataDir: dir, postgresqlConf: conf })
    try {
      expect((await second.query('select gid from pg_prepared_xacts')).rows).toEqual([{ gid: 'kept' }])
      await lockFailure(second.query('insert into lk values (1)'))
      await second.exec(`rollback prepared 'kept'`)
      await second.query('insert into lk values (1)')
      expect((await second.query('select id from lk')).rows).toEqual([{ id: 1 }])
    } finally {
      await second.close()
    }
  }, 60_000)
})
