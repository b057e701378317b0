import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { DatabaseError, PGlite } from '../src/index.js'
import { rejection } from './helpers.js'

/*
 * statement_timeout stops a running statement with 57014, as on a server
 * (issue "no way to stop a statement": "statement_timeout does not stop
 * pg_sleep either"). The engine's alarm is delivered where the engine calls
 * out to JavaScript while it works, and its interrupt checks call out every
 * 512 passes (engine/loading/interrupt-polls.ts), so every statement does.
 */

/** The SQLSTATE `promise` rejects with (a DatabaseError), or undefined when it resolves. */
async function sqlState(promise: Promise<unknown>): Promise<string | undefined> {
  const err = await promise.then(() => undefined, (e: unknown) => e)
  if (err === undefined) return undefined
  expect(err).toBeInstanceOf(DatabaseError)
  return (err as DatabaseError).code
}

describe('statement_timeout', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec('create table big as select g, md5(g::text) as m from generate_series(1, 300000) g')
  })
  afterAll(async () => {
    await db.close()
  })

  it('stops pg_sleep, a sort that spills, a spilled series and an UPDATE, each with 57014, and changes nothing', async () => {
    await db.exec(`set statement_timeout = '150ms'`)
    try {
      const started = performance.now()
      const err = await rejection(db.query('select pg_sleep(5)'))
      expect(err).toBeInstanceOf(DatabaseError)
      expect(err).toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' })
      expect(performance.now() - started).toBeLessThan(4000)
      await db.exec(`set work_mem = '64kB'`)
      expect(await sqlState(db.query('select count(*) from (select g from generate_series(1, 5000000) g order by md5(g::text)) s'))).toBe('57014')
      expect(await sqlState(db.query('select count(*) from generate_series(1, 50000000)'))).toBe('57014')
      expect(await sqlState(db.query(`update big set m = m || 'x' from generate_series(1, 20)`))).toBe('57014')
    } finally {
      await db.exec('reset statement_timeout; reset work_mem')
    }
    expect((await db.query(`select count(*)::int as n from big where m like '%x'`)).rows).toEqual([{ n: 0 }])
    // Without the setting the same statement runs to its end.
    expect((await db.query<{ slept: string }>('select pg_sleep(0.2)::text as slept')).rows).toEqual([{ slept: '' }])
  })

  it('stops a statement that never calls out of the engine too (a PL/pgSQL loop), through the interrupt polls', async () => {
    // PL/pgSQL loads (file reads, which do call out) on its first use: before the timer, so only the loop runs under it.
    await db.exec('do $$ begin end $$')
    await db.exec(`set statement_timeout = '50ms'`)
    try {
      // It used to run past the timeout to its end (3,000,000 passes take about 0.3 s here).
      expect(await sqlState(db.exec('do $$ declare i int := 0; begin while i < 3000000 loop i := i + 1; end loop; end $$'))).toBe('57014')
    } finally {
      await db.exec('reset statement_timeout')
    }
  })

  it('applies per caller setting: SET LOCAL in a transaction, and nothing once reset', async () => {
    const committed = db.transaction(async (tx) => {
      await tx.exec(`set local statement_timeout = '100ms'`)
      expect(await sqlState(tx.query('select pg_sleep(3)'))).toBe('57014')
    })
    // The canceled statement failed the transaction, as any ERROR does.
    expect(await sqlState(committed)).toBe('25P02')
    expect(await sqlState(db.query('select pg_sleep(0.2)'))).toBeUndefined()
  })

  it('is enforced while a timeout that ends the session is set; that one rolls back with 25P04 and the engine lives', async () => {
    await db.exec(`set transaction_timeout = '300ms'; set statement_timeout = '50ms'`)
    try {
      await db.exec('create temp table tt (a int)')
      // statement_timeout fires before the transaction can be due.
      expect(await sqlState(db.query('select pg_sleep(0.2)'))).toBe('57014')
      await db.exec(`set statement_timeout = 0`)
      const err = await rejection(
        db.transaction(async (tx) => {
          await tx.query('insert into tt values (1)')
          // Past transaction_timeout mid-statement: canceled, as ending the session would end the engine.
          await tx.query('select pg_sleep(0.5)')
        }),
      )
      expect(err).toBeInstanceOf(DatabaseError)
      expect((err as DatabaseError).code).toBe('57014')
      // Past it between statements: the next call rolls back with 25P04.
      await db.exec('begin')
      await new Promise((resolve) => setTimeout(resolve, 400))
      expect(await sqlState(db.query('select 1'))).toBe('25P04')
      expect(db.closed).toBe(false)
      expect((await db.query('select count(*)::int as n from tt')).rows).toEqual([{ n: 0 }])
    } finally {
      await db.exec('reset transaction_timeout; reset statement_timeout; drop table if exists tt')
    }
    for (const setting of ['idle_in_transaction_session_timeout', 'idle_session_timeout']) {
      await db.exec(`set ${setting} = '10s'; set statement_timeout = '50ms'`)
      try {
        // The idle timeouts are armed only between requests: the statement's own timeout still stops it.
        expect(await sqlState(db.query('select pg_sleep(0.2)'))).toBe('57014')
      } finally {
        await db.exec(`reset ${setting}; reset statement_timeout`)
      }
    }
  })

  it('keeps the engine alive with client_connection_check_interval set', async () => {
    // A timeout well above the short sleep: on a loaded machine a 50 ms sleep took over 100 ms.
    await db.exec(`set client_connection_check_interval = 10; set statement_timeout = '500ms'`)
    try {
      expect(await sqlState(db.query('select pg_sleep(3)'))).toBe('57014')
      expect(await sqlState(db.query('select pg_sleep(0.05)'))).toBeUndefined()
    } finally {
      await db.exec('reset all')
    }
    expect((await db.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
  })

  it('stops a statement on a directory database, whose committed data stays', async () => {
    const dir = await PGlite.create(tempDir())
    try {
      await dir.exec('create table t as select generate_series(1, 1000) as n')
      await dir.exec(`set statement_timeout = '100ms'`)
      expect(await sqlState(dir.query('delete from t where pg_sleep(0.01) is not null'))).toBe('57014')
      expect((await dir.query('select count(*)::int as n from t')).rows).toEqual([{ n: 1000 }])
    } finally {
      await dir.close()
    }
  })
})
