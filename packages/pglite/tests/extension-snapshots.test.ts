import { describe, expect, it } from 'vitest'
import { citext, hstore, pg_trgm, pgcrypto } from '../src/contrib.js'
import { PGlite } from '../src/index.js'

/**
 * In-memory databases with contrib side modules start from a snapshot like
 * plain ones: a later instance with the same extensions gets a module with
 * the same side modules preloaded, then the first one's started memory and
 * what Postgres had linked (engine/start/dynamic-links.ts). A restore is a memory
 * copy, so the copy reports the same `pg_postmaster_start_time()` as the
 * instance that booted; a boot would report its own.
 */

const extensions = { pg_trgm, hstore, citext, pgcrypto }

async function startTime(db: PGlite): Promise<string> {
  const { rows } = await db.query<{ t: string }>('select pg_postmaster_start_time()::text as t')
  return rows[0]!.t
}

const USE_ALL = `
  create extension if not exists pg_trgm; create extension if not exists hstore;
  create extension if not exists citext; create extension if not exists pgcrypto`

const CHECK_ALL = `select similarity('hello world', 'hello world!') > 0.8 as trgm, ('a=>1, b=>2'::hstore)->'b' as h,
  'MiXeD'::citext = 'mixed' as ci, encode(digest('abc', 'sha256'), 'hex') as sha`

const EXPECTED = { trgm: true, h: '2', ci: true, sha: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' }

describe('databases with contrib extensions start from a snapshot', () => {
  it('restores a later instance with the same extensions, and every extension works in it, functions first called after the restore included', async () => {
    const first = await PGlite.create({ extensions })
    const second = await PGlite.create({ extensions })
    try {
      expect(await startTime(second)).toBe(await startTime(first))
      await second.exec(USE_ALL)
      expect((await second.query(CHECK_ALL)).rows[0]).toEqual(EXPECTED)
      // Functions no instance had looked up before: linked in the restored module.
      const { rows } = await second.query<{ t: string[]; w: number; k: boolean; u: boolean }>(
        "select show_trgm('ab') as t, word_similarity('hel', 'hello') as w, exist('k=>v'::hstore, 'k') as k, length(gen_random_bytes(16)) = 16 as u",
      )
      expect(rows[0]).toEqual({ t: ['  a', ' ab', 'ab '], w: 0.75, k: true, u: true })
      // The first instance is untouched by the second's extensions.
      expect((await first.query<{ n: number }>("select count(*)::int as n from pg_extension where extname = 'hstore'")).rows[0]!.n).toBe(0)
    } finally {
      await second.close()
      await first.close()
    }
  })

  it('restores a third instance too, and an instance with other extensions boots on its own', async () => {
    const a = await PGlite.create({ extensions })
    const b = await PGlite.create({ extensions })
    const other = await PGlite.create({ extensions: { hstore } })
    try {
      expect(await startTime(b)).toBe(await startTime(a))
      expect(await startTime(other)).not.toBe(await startTime(a))
      await other.exec('create extension hstore')
      expect((await other.query<{ h: string }>("select ('x=>y'::hstore)->'x' as h")).rows[0]!.h).toBe('y')
    } finally {
      await Promise.all([a.close(), b.close(), other.close()])
    }
  })

  it('clones a database whose extensions are in use as a memory copy: the copy has the data and the extensions, and goes its own way', async () => {
    const db = await PGlite.create({ extensions })
    try {
      await db.exec(USE_ALL)
      await db.exec("create table doc (id int primary key, body text, tags hstore, email citext); insert into doc values (1, 'the quick brown fox', 'kind=>note', 'Ann@Example.com')")
      expect((await db.query(CHECK_ALL)).rows[0]).toEqual(EXPECTED)
      const copy = await db.clone()
      try {
        expect(await startTime(copy)).toBe(await startTime(db))
        const found = await copy.query<{ id: number; kind: string }>(
          "select id, tags->'kind' as kind from doc where email = 'ann@example.com' and similarity(body, 'quick brown') > 0.3",
        )
        expect(found.rows).toEqual([{ id: 1, kind: 'note' }])
        expect((await copy.query(CHECK_ALL)).rows[0]).toEqual(EXPECTED)
        await copy.exec("insert into doc values (2, 'only in the copy', '', 'b@example.com')")
        expect((await db.query<{ n: number }>('select count(*)::int as n from doc')).rows[0]!.n).toBe(1)
        expect((await copy.query<{ n: number }>('select count(*)::int as n from doc')).rows[0]!.n).toBe(2)
      } finally {
        await copy.close()
      }
    } finally {
      await db.close()
    }
  })

  it("restores pgvector's bundle (an add-on's bundlePath) the same way: vectors, <-> and an HNSW index in the restored instance", async () => {
    const { vector } = await import('@electric-sql/pglite-pgvector')
    const first = await PGlite.create({ extensions: { vector } })
    const second = await PGlite.create({ extensions: { vector } })
    try {
      expect(await startTime(second)).toBe(await startTime(first))
      await second.exec('create extension vector; create table items (id int primary key, embedding vector(3))')
      await second.exec('insert into items select g, array[g, g * 2, g * 3]::vector from generate_series(1, 200) g')
      await second.exec('create index items_hnsw on items using hnsw (embedding vector_l2_ops)')
      await second.exec('set enable_seqscan = off')
      const { rows } = await second.query<{ id: number }>("select id from items order by embedding <-> '[10,20,30]' limit 3")
      expect(rows.map((r) => r.id).sort((x, y) => x - y)).toEqual([9, 10, 11])
      const plan = await second.query<{ 'QUERY PLAN': string }>("explain select id from items order by embedding <-> '[10,20,30]' limit 3")
      expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('items_hnsw')
    } finally {
      await second.close()
      await first.close()
    }
  })

  it("reuses a closed database's module for the next one: create, use, clone and close in a row, every instance a restore that works", async () => {
    const first = await PGlite.create({ extensions })
    const booted = await startTime(first)
    await first.close()
    for (let round = 0; round < 4; round++) {
      const db = await PGlite.create({ extensions })
      expect(await startTime(db)).toBe(booted)
      await db.exec(USE_ALL)
      await db.exec(`create table r (id int primary key, tags hstore); insert into r values (${round}, 'round=>${round}')`)
      expect((await db.query(CHECK_ALL)).rows[0]).toEqual(EXPECTED)
      // A clone of a database with more links than the start snapshot, into whichever module is free.
      const copy = await db.clone()
      expect((await copy.query<{ v: string }>("select tags->'round' as v from r")).rows).toEqual([{ v: String(round) }])
      expect((await copy.query(CHECK_ALL)).rows[0]).toEqual(EXPECTED)
      await copy.close()
      await db.close()
    }
  })

  it('clones an extension database whose memory grew past the default module size, as a memory copy into a larger module', async () => {
    const db = await PGlite.create({ extensions: { pg_trgm, hstore } })
    try {
      await db.exec("create extension pg_trgm; create extension hstore; set work_mem = '400MB'")
      await db.query('select count(*) from (select md5(g::text) as m from generate_series(1, 1500000) g order by m) s')
      expect(db.Module.HEAPU8.byteLength).toBeGreaterThan(128 * 1024 * 1024)
      const copy = await db.clone()
      try {
        expect(await startTime(copy)).toBe(await startTime(db))
        expect((await copy.query("select similarity('ab', 'ab') as s, ('a=>1'::hstore)->'a' as h")).rows[0]).toEqual({ s: 1, h: '1' })
      } finally {
        await copy.close()
      }
    } finally {
      await db.close()
    }
  })
})
