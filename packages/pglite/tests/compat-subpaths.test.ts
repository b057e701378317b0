// The subpath entries `@electric-sql/pglite` has and we added: one module
// per contrib bundle, `/template`, and `Mutex`/`TransactionAbortedError`
// from the root, each loaded from the built package by its public name.
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { DatabaseError, Mutex, PGlite, TransactionAbortedError } from '@pgwasm/pglite'
import { cube } from '@pgwasm/pglite/contrib/cube'
import { earthdistance } from '@pgwasm/pglite/contrib/earthdistance'
import { uuid_ossp } from '@pgwasm/pglite/contrib/uuid_ossp'
import { identifier, query, sql } from '@pgwasm/pglite/template'

const require = createRequire(import.meta.url)

describe('contrib subpaths', () => {
  it('installs bundles imported one module each, so CREATE EXTENSION works', async () => {
    const db = await PGlite.create({ extensions: { cube, earthdistance, uuid_ossp } })
    try {
      await db.exec('CREATE EXTENSION earthdistance CASCADE; CREATE EXTENSION "uuid-ossp"')
      const { rows } = await db.query<{ d: number; arc: number; v: string }>(
        "SELECT round(earth_distance(ll_to_earth(0, 0), ll_to_earth(0, 1))) AS d, round(earth() * radians(1)) AS arc, uuid_generate_v5(uuid_ns_url(), 'x')::text AS v",
      )
      // One degree along the equator is one degree of arc of cube's earth.
      expect(rows[0]!.d).toBe(rows[0]!.arc)
      expect(rows[0]!.d).toBeGreaterThan(110_000)
      expect(rows[0]!.v).toMatch(/^[0-9a-f-]{36}$/)
    } finally {
      await db.close()
    }
  })

  it('loads a contrib module through require', async () => {
    const { hstore } = require('@pgwasm/pglite/contrib/hstore') as typeof import('@pgwasm/pglite/contrib/hstore')
    const { PGlite: CjsPGlite } = require('@pgwasm/pglite') as typeof import('@pgwasm/pglite')
    const db = await CjsPGlite.create({ extensions: { hstore } })
    try {
      await db.exec('CREATE EXTENSION hstore')
      expect((await db.query("SELECT 'a=>1'::hstore -> 'a' AS v")).rows).toEqual([{ v: '1' }])
    } finally {
      await db.close()
    }
  })

  it('names every module after the export it holds', async () => {
    const contrib = (await import('@pgwasm/pglite/contrib')) as Record<string, unknown>
    for (const name of Object.keys(contrib)) {
      const single = (await import(`@pgwasm/pglite/contrib/${name}`)) as Record<string, unknown>
      expect(Object.keys(single), name).toEqual([name])
      expect(single[name], name).toEqual(contrib[name])
    }
  })
})

describe('template subpath', () => {
  it('builds queries that run on the engine', async () => {
    const db = await PGlite.create()
    try {
      const table = 'odd "name"'
      await db.exec(`CREATE TABLE ${query`${identifier`${table}`}`.query} (n int)`)
      const filter = sql`g > ${1}`
      const q = query`INSERT INTO ${identifier`${table}`} SELECT g FROM generate_series(1, ${3}) g WHERE ${filter} RETURNING n`
      expect(q.params).toEqual([3, 1])
      expect((await db.query(q.query, q.params)).rows).toEqual([{ n: 2 }, { n: 3 }])
    } finally {
      await db.close()
    }
  })

  it('nests a fragment from the ESM build in a query of the CJS build', async () => {
    const { PGlite: CjsPGlite } = require('@pgwasm/pglite') as typeof import('@pgwasm/pglite')
    const db = await CjsPGlite.create()
    try {
      await db.sql`CREATE TABLE ${identifier`mixed`} (v text)`
      await db.sql`INSERT INTO ${identifier`mixed`} VALUES (${'x'})`
      expect((await db.sql`SELECT v FROM ${identifier`mixed`}`).rows).toEqual([{ v: 'x' }])
    } finally {
      await db.close()
    }
  })

  it('is the same module through require', () => {
    const cjs = require('@pgwasm/pglite/template') as typeof import('@pgwasm/pglite/template')
    expect(cjs.query`SELECT ${1}`).toEqual({ query: 'SELECT $1', params: [1] })
  })
})

describe('Mutex', () => {
  it('runs exclusive sections one at a time, in call order', async () => {
    const mutex = new Mutex()
    const log: string[] = []
    const section = (name: string) =>
      mutex.runExclusive(async () => {
        log.push(`${name}:in`)
        await Promise.resolve()
        log.push(`${name}:out`)
      })
    await Promise.all([section('a'), section('b'), section('c')])
    expect(log).toEqual(['a:in', 'a:out', 'b:in', 'b:out', 'c:in', 'c:out'])
    expect(mutex.isLocked()).toBe(false)
  })

  it('releases the lock when a section throws', async () => {
    const mutex = new Mutex()
    await expect(mutex.runExclusive(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom')
    expect(mutex.isLocked()).toBe(false)
  })

  it('rejects waiters on cancel and lets waitForUnlock resolve on release', async () => {
    const canceled = new Error('canceled')
    const mutex = new Mutex(canceled)
    const release = await mutex.acquire()
    const waiter = mutex.acquire()
    const unlocked = mutex.waitForUnlock()
    mutex.cancel()
    await expect(waiter).rejects.toBe(canceled)
    release()
    release() // a second call does nothing
    await unlocked
    expect(mutex.isLocked()).toBe(false)
  })
})

describe('TransactionAbortedError', () => {
  it('is a DatabaseError with the SQLSTATE of the COMMIT that rolled back', async () => {
    const db = await PGlite.create()
    try {
      const err = await db
        .transaction(async (tx) => {
          await tx.query('SELECT 1/0').catch(() => undefined)
        })
        .catch((e: unknown) => e)
      expect(new TransactionAbortedError()).toBeInstanceOf(DatabaseError)
      expect(err).toBeInstanceOf(DatabaseError)
      expect(err).toBeInstanceOf(TransactionAbortedError)
      expect((err as DatabaseError).code).toBe(new TransactionAbortedError().code)
    } finally {
      await db.close()
    }
  })
})
