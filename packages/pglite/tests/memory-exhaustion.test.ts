import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DatabaseError, PGlite } from '../src/index.js'

/*
 * SQL that fills the engine's whole address space (2 GiB) with objects the
 * session keeps: before, the ERROR for it could not be reported (its report
 * needed memory too), the engine ended and an in-memory database was lost
 * for one statement (issue "shared engine, separate clients", finding 1).
 * Now it is the 53200 a server's backend gives, and the data stays.
 */

const COLUMNS = Array.from({ length: 200 }, (_, i) => `${i} as c${i}`).join(', ')

/** 500 `PREPARE`s of 200 columns in one query string: each keeps a copy of the whole string (~1.2 MB). */
function prepares(first: number): string {
  let sql = ''
  for (let i = first; i < first + 500; i++) sql += `prepare p${i} as select ${COLUMNS};`
  return sql
}

async function floodUntilRefused(db: PGlite, maxBatches: number): Promise<{ error: unknown; prepared: number }> {
  for (let batch = 0; batch < maxBatches; batch++) {
    try {
      await db.exec(prepares(batch * 500))
    } catch (error) {
      return { error, prepared: batch * 500 }
    }
  }
  return { error: undefined, prepared: maxBatches * 500 }
}

describe('prepared statements that fill the engine', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec('create table keep (x int); insert into keep values (42)')
  })
  afterAll(async () => {
    await db?.close()
  })

  it('fail with 53200 at the 2 GiB address space, and the database goes on with its data', async () => {
    const { error, prepared } = await floodUntilRefused(db, 8)
    expect(error).toBeInstanceOf(DatabaseError)
    expect(error).toMatchObject({ code: '53200', message: 'out of memory' })
    // About 1,500 of them fit: the refusal came from the address space, not earlier.
    expect(prepared).toBeGreaterThanOrEqual(1000)
    await db.exec('deallocate all')
    expect((await db.query('select x from keep')).rows).toEqual([{ x: 42 }])
    await db.exec('insert into keep values (43)')
    expect((await db.query<{ n: number }>('select count(*)::int as n from keep')).rows).toEqual([{ n: 2 }])
  }, 120_000)
})

describe('prepared statements past maxMemory', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create({ maxMemory: 640 * 1024 * 1024 })
    await db.exec('create table keep (x int); insert into keep values (42)')
  })
  afterAll(async () => {
    await db?.close()
  })

  it('fail with 53200 at the ceiling, again after the statements are dropped, and the database goes on', async () => {
    for (let round = 0; round < 3; round++) {
      const { error, prepared } = await floodUntilRefused(db, 8)
      expect(error).toMatchObject({ code: '53200' })
      expect(prepared).toBeLessThan(500 * 8)
      await db.exec('deallocate all')
      expect((await db.query('select x from keep')).rows).toEqual([{ x: 42 }])
    }
    // The heap stays at the ceiling (WASM memory never shrinks), but what it held was given back:
    // the in-memory database still takes ~40 MB of new rows.
    await db.exec('create table more as select g, md5(g::text) as h from generate_series(1, 500000) g')
    expect((await db.query('select count(*)::int as n from more')).rows).toEqual([{ n: 500000 }])
  }, 120_000)
})
