import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DatabaseError, PGlite } from '../src/index.js'

/*
 * Statements that compute without calling out of the engine (issue
 * "runaway statements") are stopped where Postgres checks for interrupts:
 * the engine's checks poll the host (engine/loading/interrupt-polls.ts). Before,
 * each of these ran until the process was killed.
 */

/** The four shapes of a runaway statement; each runs for minutes or forever. */
export const RUNAWAYS: Readonly<Record<string, string>> = {
  'a 3-way cross join': 'select count(*) from t a, t b, t c',
  'an endless PL/pgSQL loop': 'do $$ begin loop end loop; end $$',
  'a recursive CTE that never ends': 'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r where n < 0',
  'a catastrophic regex': `select repeat('a', 999) ~ '^(a*)(a*)(a*)\\1\\2\\3\\1\\2\\3\\1x?$'`,
}

/** What `promise` rejected with; fails the test when it resolves. */
async function failure(promise: Promise<unknown>): Promise<DatabaseError> {
  const err = await promise.then(
    () => new Error('the statement finished'),
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(DatabaseError)
  return err as DatabaseError
}

describe('runaway statements in process', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec('create table t as select g from generate_series(1, 1000) g; create table log (what text)')
  })
  afterAll(async () => {
    await db.close()
  })

  /** The database answers, its data intact, and takes a write. */
  async function usable(): Promise<void> {
    expect((await db.query<{ n: number }>('select count(*)::int as n from t')).rows).toEqual([{ n: 1000 }])
    await db.query('insert into log values ($1)', ['after'])
    await db.query('delete from log')
  }

  for (const [name, sql] of Object.entries(RUNAWAYS)) {
    it(`statement_timeout stops ${name} with 57014 and rolls its transaction back`, async () => {
      await db.exec(`set statement_timeout = '200ms'`)
      try {
        const err = await failure(
          db.transaction(async (tx) => {
            await tx.query('insert into log values ($1)', ['inside'])
            await tx.query(sql)
          }),
        )
        expect(err).toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' })
      } finally {
        await db.exec('reset statement_timeout')
      }
      expect((await db.query('select * from log')).rows).toEqual([])
      await usable()
    })
  }

  it('statement_timeout still stops a loop while transaction_timeout is set, and a transaction_timeout that comes first cancels it', async () => {
    try {
      await db.exec(`set transaction_timeout = '10s'`)
      await db.exec(`set statement_timeout = '200ms'`)
      expect(await failure(db.exec(RUNAWAYS['an endless PL/pgSQL loop']!))).toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' })
      await db.exec(`set transaction_timeout = '300ms'`)
      await db.exec(`set statement_timeout = '60s'`)
      // Postgres would end the session here; the one engine every caller shares cancels the statement instead.
      expect(await failure(db.exec(RUNAWAYS['an endless PL/pgSQL loop']!))).toMatchObject({ code: '57014' })
    } finally {
      await db.exec('reset statement_timeout; reset transaction_timeout')
    }
    await usable()
  })

  it('a signal aborted before the call, or while the call waits its turn, rejects with 57014 and runs nothing', async () => {
    const before = new AbortController()
    before.abort()
    const early = await failure(db.query('insert into log values ($1)', ['early'], { signal: before.signal }))
    expect(early.code).toBe('57014')

    const waiting = new AbortController()
    const first = db.query('select count(*) from t a, t b')
    const second = db.query('insert into log values ($1)', ['queued'], { signal: waiting.signal })
    waiting.abort()
    expect((await failure(second)).code).toBe('57014')
    await first
    expect((await db.query('select * from log')).rows).toEqual([])
  })

  it('a transaction whose signal is aborted between its statements rejects the next one with 57014 and rolls back', async () => {
    const controller = new AbortController()
    const err = await failure(
      db.transaction(
        async (tx) => {
          await tx.query('insert into log values ($1)', ['inside'])
          controller.abort()
          await tx.query('insert into log values ($1)', ['after the abort'])
        },
        { signal: controller.signal },
      ),
    )
    expect(err.code).toBe('57014')
    expect((await db.query('select * from log')).rows).toEqual([])
    await usable()
  })
})

describe('a memory ceiling in process', () => {
  const MAX = 256 * 1024 * 1024
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create({ maxMemory: MAX })
    await db.exec('create table t as select g from generate_series(1, 1000) g')
  })
  afterAll(async () => {
    await db.close()
  })

  it('fails statements that need more heap or more in-memory file space with 53200 or 53100, rolls them back, and the instance goes on', async () => {
    const hostile: [sql: string, code: string, message: RegExp][] = [
      [`select length(repeat(md5('x'), 10000000))`, '53200', /^out of memory$/],
      // The series spills to a temporary file before the array outgrows the heap.
      ['select array_length(array_agg(g), 1) from generate_series(1, 100000000) g', '53100', /^could not write to file "base\/pgsql_tmp\/.*": No space left on device$/],
      [`create table junk as select repeat(md5(g::text), 32) as s from generate_series(1, 5000000) g`, '53100', /^could not extend file .*: No space left on device$/],
      [`copy (select repeat(md5(g::text), 32) from generate_series(1, 5000000) g) to '/tmp/big'`, '53100', /^could not write to COPY file: No space left on device$/],
    ]
    for (const [sql, code, message] of hostile) {
      const err = await failure(db.query(sql))
      expect(err.code, sql).toBe(code)
      expect(err.message, sql).toMatch(message)
      expect((await db.query<{ n: number }>('select count(*)::int as n from t')).rows).toEqual([{ n: 1000 }])
    }
    expect((await db.query(`select to_regclass('junk') as junk`)).rows).toEqual([{ junk: null }])
    // The heap stays within the ceiling and its documented margin (20%, at most 96 MiB).
    expect(db.Module.HEAPU8.byteLength).toBeLessThanOrEqual(MAX + 96 * 1024 * 1024)
    // Space freed by a failed statement is there for the next one.
    await db.exec('create table ok as select g from generate_series(1, 100000) g; drop table ok')
  })

  it('refuses a maxMemory that is not a positive whole number of bytes', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new PGlite({ maxMemory: bad }), String(bad)).toThrow(RangeError)
    }
  })
})
