import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { PGlite as TheirPGlite } from '@electric-sql/pglite'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { PGlite } from '../src/index.js'

/**
 * What a clean close of a directory database leaves for its next open
 * (engine/backend/clean-shutdown.ts): Postgres keeps its relation cache init files,
 * and the catalog's array types come from the close instead of a query.
 * Trusted only when nothing started the cluster in between.
 */

const MARKER = '.pgwasm-clean-shutdown'
/** The first line of the catalog query an open runs when it knows no array types (engine/start/template.ts). */
const ARRAY_TYPES_QUERY = /(statement|execute [^:]*): SELECT b\.oid::int AS elem, a\.oid::int AS arr/
/** Every statement in the server log, which `debug: 1` sends to console.debug. */
const LOGGED = { debug: 1, postgresqlConf: { log_statement: 'all' } } as const

async function serverLog<T>(run: () => Promise<T>): Promise<{ result: T; log: string[] }> {
  const log: string[] = []
  const spy = vi.spyOn(console, 'debug').mockImplementation((...args: unknown[]) => {
    log.push(args.map(String).join(' '))
  })
  try {
    return { result: await run(), log }
  } finally {
    spy.mockRestore()
  }
}

function arrayTypeQueries(log: readonly string[]): number {
  return log.filter((l) => ARRAY_TYPES_QUERY.test(l)).length
}

/** The database's own init file: its inode and mtime say whether Postgres wrote it again. */
function initFile(dir: string, dbOid: number): { ino: number; mtimeMs: number } {
  const { ino, mtimeMs } = statSync(join(dir, 'base', String(dbOid), 'pg_internal.init'))
  return { ino, mtimeMs }
}

async function makeDir(): Promise<{ dir: string; dbOid: number }> {
  const dir = tempDir()
  const db = await PGlite.create(dir)
  await db.exec(`create type mood as enum ('sad', 'ok', 'happy'); create table t (id int primary key, m mood[]); insert into t values (1, '{ok,happy}')`)
  const dbOid = (await db.query<{ oid: number }>('select oid::int from pg_database where datname = current_database()')).rows[0]!.oid
  await db.close()
  return { dir, dbOid }
}

afterEach(() => vi.restoreAllMocks())

describe('reopening a cleanly closed directory', () => {
  it('keeps the init files and knows the array types (a user enum array parses) without the catalog query', async () => {
    const { dir, dbOid } = await makeDir()
    expect(existsSync(join(dir, MARKER))).toBe(true)
    // The first open after the database was made rebuilds the init file once; from then on it stays.
    await (await PGlite.create(dir)).close()
    const before = initFile(dir, dbOid)
    const { result: rows, log } = await serverLog(async () => {
      const db = await PGlite.create(dir, LOGGED)
      const found = (await db.query<{ m: string[] }>('select m from t')).rows
      await db.close()
      return found
    })
    expect(rows).toEqual([{ m: ['ok', 'happy'] }])
    expect(initFile(dir, dbOid)).toEqual(before)
    // The close's query only; an open that queried would add a second.
    expect(arrayTypeQueries(log), log.join('\n')).toBe(1)

    // The control: without the marker, Postgres removes and rebuilds the file, and the open queries the catalog.
    rmSync(join(dir, MARKER))
    const { log: fullLog } = await serverLog(async () => (await PGlite.create(dir, LOGGED)).close())
    expect(initFile(dir, dbOid)).not.toEqual(before)
    expect(arrayTypeQueries(fullLog), fullLog.join('\n')).toBe(2)
  })

  it('a type made in one session parses in the next; one made in a transaction left open at close does not exist', async () => {
    const { dir } = await makeDir()
    const db = await PGlite.create(dir)
    await db.exec(`create type size as enum ('s', 'm', 'l')`)
    await db.close()
    const open = await PGlite.create(dir)
    await open.exec(`begin; create type shade as enum ('dark', 'light')`)
    await open.close()
    expect(JSON.parse(readFileSync(join(dir, MARKER), 'utf8')).note).toBeUndefined()
    const again = await PGlite.create(dir)
    expect((await again.query<{ a: string[] }>(`select array['m', 'l']::size[] as a`)).rows).toEqual([{ a: ['m', 'l'] }])
    expect((await again.query<{ t: string | null }>(`select to_regtype('shade')::text as t`)).rows).toEqual([{ t: null }])
    await again.close()
  })

  it('after REINDEX of pg_class (its init file entry goes stale) the next open reads the catalog right', async () => {
    const { dir } = await makeDir()
    const db = await PGlite.create(dir)
    await db.exec('reindex table pg_class')
    await db.exec('create table u (id int)')
    await db.close()
    const again = await PGlite.create(dir)
    const { rows } = await again.query<{ n: number; u: string }>(`select (select count(*)::int from t) as n, 'u'::regclass::text as u`)
    expect(rows).toEqual([{ n: 1, u: 'u' }])
    await again.close()
  })

  it('trusts nothing of the marker when another engine opened the directory in between', async () => {
    const { dir } = await makeDir()
    // PGlite itself (same Postgres major) opens the directory and adds a type.
    const theirs = new TheirPGlite(dir)
    await theirs.exec(`create type color as enum ('red', 'blue')`)
    await theirs.close()
    const ours = await PGlite.create(dir)
    // With the old marker's array types, color[] would come back as the string '{red,blue}'.
    expect((await ours.query<{ a: string[] }>(`select array['red', 'blue']::color[] as a`)).rows).toEqual([{ a: ['red', 'blue'] }])
    expect((await ours.query<{ m: string[] }>('select m from t')).rows).toEqual([{ m: ['ok', 'happy'] }])
    await ours.close()
  })
})

describe('a stale marker', () => {
  it('is not trusted once a later session has run (pg_control moved on), even with init files that hash the same', async () => {
    const { dir } = await makeDir()
    await (await PGlite.create(dir)).close()
    const old = readFileSync(join(dir, MARKER), 'utf8')
    const db = await PGlite.create(dir)
    await db.exec(`create type color as enum ('red', 'blue')`)
    await db.close()
    // The old marker put back: its init file hashes still match; only pg_control says a session ran since.
    writeFileSync(join(dir, MARKER), old)
    const again = await PGlite.create(dir)
    expect((await again.query<{ a: string[] }>(`select array['red', 'blue']::color[] as a`)).rows).toEqual([{ a: ['red', 'blue'] }])
    await again.close()
  })
})

describe("a directory database's buffer pool", () => {
  it('is sized from its relation files at open (32 MB fresh, more once the data outgrows it); postgresqlConf wins', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    expect((await db.query<{ s: string }>(`select current_setting('shared_buffers') as s`)).rows[0]!.s).toBe('32MB')
    await db.exec(`create table big as select g as id, repeat('x', 1000) as v from generate_series(1, 40000) g`)
    await db.close()
    const grown = await PGlite.create(dir)
    expect((await grown.query<{ s: string }>(`select current_setting('shared_buffers') as s`)).rows[0]!.s).toBe('128MB')
    await grown.close()
    const set = await PGlite.create(dir, { postgresqlConf: { shared_buffers: '48MB' } })
    expect((await set.query<{ s: string }>(`select current_setting('shared_buffers') as s`)).rows[0]!.s).toBe('48MB')
    await set.close()
  })
})
