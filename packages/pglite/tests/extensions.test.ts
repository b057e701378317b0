import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as contrib from '../src/contrib.js'
import type { ContribExtension } from '../src/contrib.js'
import { live } from '../src/live.js'
import { PGlite } from '../src/index.js'

/** Every bundle once (the spi aliases share `spi`): one boot serves every check below. */
const bundles: Record<string, ContribExtension> = Object.fromEntries(
  Object.entries(contrib).filter(([key]) => !['autoinc', 'insert_username', 'moddatetime', 'refint'].includes(key)),
)

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create({ extensions: bundles })
})

afterAll(async () => {
  await db?.close()
})

/** Rows of the last statement of `sql`. */
async function rows(sql: string, instance: PGlite = db): Promise<unknown[]> {
  const results = await instance.exec(sql)
  return results[results.length - 1]!.rows
}

async function value(sql: string, instance: PGlite = db): Promise<unknown> {
  const [row] = (await rows(sql, instance)) as Record<string, unknown>[]
  return row ? Object.values(row)[0] : undefined
}

describe('the contrib bundles', () => {
  it('covers every bundle in the engine package', async () => {
    const { readdirSync } = await import('node:fs')
    const { locateEngine } = await import('../src/engine/loading/assets.js')
    const shipped = readdirSync((await locateEngine()).dist)
      .filter((f) => f.endsWith('.tar.gz'))
      .map((f) => f.slice(0, -'.tar.gz'.length))
      .sort()
    expect(Object.values(bundles).map((b) => b.bundle).sort()).toEqual(shipped)
  })
})

describe('each contrib extension works after CREATE EXTENSION', () => {
  it("amcheck: bt_index_check finds a fresh primary key index sound", async () => {
    expect(
      await value(`create extension if not exists amcheck; create table ac (a int primary key); insert into ac select generate_series(1, 1000);
        select bt_index_check('ac_pkey'::regclass)::text`),
    ).toBe('')
  })

  it("auto_explain: LOAD adds its settings", async () => {
    expect(await value(`load 'auto_explain'; show auto_explain.log_min_duration`)).toBe('-1')
  })

  it('bloom: an index USING bloom is created', async () => {
    expect(
      await value(`create extension if not exists bloom; create table bl (a int, b int); insert into bl select g, g from generate_series(1, 100) g;
        create index bl_idx on bl using bloom (a, b);
        select a.amname from pg_class c join pg_am a on a.oid = c.relam where c.relname = 'bl_idx'`),
    ).toBe('bloom')
  })

  it('btree_gin: an int column gets a GIN index', async () => {
    expect(
      await value(`create extension if not exists btree_gin; create table bg (a int); create index bg_idx on bg using gin (a);
        select a.amname from pg_class c join pg_am a on a.oid = c.relam where c.relname = 'bg_idx'`),
    ).toBe('gin')
  })

  it('btree_gist: an exclusion constraint on = and && rejects an overlap', async () => {
    await db.exec(`create extension if not exists btree_gist;
      create table booking (room int, during tstzrange, exclude using gist (room with =, during with &&));
      insert into booking values (1, '[2020-01-01, 2020-02-01)'), (2, '[2020-01-01, 2020-02-01)')`)
    await expect(db.exec(`insert into booking values (1, '[2020-01-15, 2020-03-01)')`)).rejects.toThrow(/violates exclusion constraint/)
  })

  it('citext: comparison ignores case', async () => {
    expect(await value(`create extension if not exists citext; select 'Hello'::citext = 'hELLO'::citext`)).toBe(true)
  })

  it('cube: cube_distance is Euclidean', async () => {
    expect(await value(`create extension if not exists cube; select cube_distance('(0,0)'::cube, '(3,4)'::cube)`)).toBe(5)
  })

  it('dict_int: intdict shortens long integers', async () => {
    expect(await value(`create extension if not exists dict_int; select ts_lexize('intdict', '12345678')`)).toEqual(['123456'])
  })

  it('dict_xsyn: xsyn finds synonyms in its sample rules', async () => {
    expect(
      await value(`create extension if not exists dict_xsyn;
        alter text search dictionary xsyn (rules = 'xsyn_sample', keeporig = false, matchsynonyms = true);
        select ts_lexize('xsyn', 'supernova')`),
    ).toEqual(['sn', 'sne', '1987a'])
  })

  it('earthdistance: one degree of longitude on the equator is about 111 km', async () => {
    expect(await value(`create extension if not exists earthdistance cascade; select round(earth_distance(ll_to_earth(0, 0), ll_to_earth(0, 1)))`)).toBe(111320)
  })

  it("file_fdw: a foreign table reads a file of the engine's file system", async () => {
    expect(
      await value(`create extension if not exists file_fdw; create server files foreign data wrapper file_fdw;
        create foreign table pg_version_file (v text) server files options (filename '/pglite/data/PG_VERSION');
        select v from pg_version_file`),
    ).toBe('18')
  })

  it('fuzzystrmatch: levenshtein counts edits', async () => {
    expect(await value(`create extension if not exists fuzzystrmatch; select levenshtein('kitten', 'sitting')`)).toBe(3)
  })

  it('hstore: -> reads a key', async () => {
    expect(await value(`create extension if not exists hstore; select 'a=>1, b=>2'::hstore -> 'b'`)).toBe('2')
  })

  it('intarray: & intersects integer arrays', async () => {
    expect(await value(`create extension if not exists intarray; select '{1,2,3}'::int[] & '{2,3,4}'::int[]`)).toEqual([2, 3])
  })

  it('isn: isbn13 accepts a valid ISBN and rejects a wrong check digit', async () => {
    expect(await value(`create extension if not exists isn; select isbn13('978-0-306-40615-7')::text`)).toBe('978-0-306-40615-7')
    await expect(db.exec(`select isbn13('978-0-306-40615-6')`)).rejects.toThrow(/invalid check digit/)
  })

  it('lo: the lo_manage trigger unlinks the large object an update replaces or a delete drops', async () => {
    const [{ oids }] = (await rows(`create extension if not exists lo; create table image (id int primary key, raster lo);
        create trigger image_raster before update or delete on image for each row execute function lo_manage(raster);
        insert into image values (1, lo_create(0)), (2, lo_create(0));
        select array_agg(raster::oid::int order by id) as oids from image`)) as [{ oids: number[] }]
    await db.exec('update image set raster = lo_create(0) where id = 1; delete from image where id = 2')
    const live = await db.query<{ oid: number }>(
      `select oid::int from pg_largeobject_metadata where oid::int = any($1::int[]) or oid = (select raster::oid from image where id = 1)`,
      [oids],
    )
    const [replacement] = (await db.query<{ raster: number }>('select raster::oid::int as raster from image where id = 1')).rows
    expect(oids).toHaveLength(2)
    expect(live.rows).toEqual([{ oid: replacement!.raster }])
  })

  it('ltree: @> tests ancestry', async () => {
    expect(await value(`create extension if not exists ltree; select 'top.science'::ltree @> 'top.science.astronomy'::ltree`)).toBe(true)
  })

  it('pageinspect: page_header reads a heap page', async () => {
    expect(
      await value(`create extension if not exists pageinspect; create table pi (a int); insert into pi values (1);
        select (page_header(get_raw_page('pi', 0))).lower > 24`),
    ).toBe(true)
  })

  it('pageinspect: a scan of committed rows sets their hint bits in an in-memory database', async () => {
    // HEAP_XMIN_COMMITTED (0x0100) can only be set once the inserting
    // commit's WAL is flushed; with unflushed commits every later read
    // would look the transaction up again.
    await db.exec(`create table hints (a int); insert into hints select g from generate_series(1, 50) g`)
    await db.exec(`select count(*) from hints`)
    expect(
      await value(`create extension if not exists pageinspect;
        select count(*) filter (where t_infomask & 256 <> 0)::int from heap_page_items(get_raw_page('hints', 0))`),
    ).toBe(50)
  })

  it('passwordcheck: LOAD makes short passwords fail', async () => {
    await expect(db.exec(`load 'passwordcheck'; create role weak password 'abc'`)).rejects.toThrow(/password is too short/)
  })

  it('pg_buffercache: the view lists buffers in use', async () => {
    expect(await value(`create extension if not exists pg_buffercache; select count(*) > 0 from pg_buffercache where relfilenode is not null`)).toBe(true)
  })

  it('pg_freespacemap: pg_freespace reports free space after VACUUM', async () => {
    await db.exec(`create extension if not exists pg_freespacemap; create table fs (a int); insert into fs select generate_series(1, 1000)`)
    await db.exec('vacuum fs')
    expect(await value(`select sum(avail) > 0 from pg_freespace('fs')`)).toBe(true)
  })

  it('pg_logicalinspect: its snapshot functions are created', async () => {
    expect(
      await value(`create extension if not exists pg_logicalinspect; select count(*)::int from pg_proc where proname in ('pg_get_logical_snapshot_info', 'pg_get_logical_snapshot_meta')`),
    ).toBe(2)
  })

  it('pg_overexplain: LOAD adds EXPLAIN (DEBUG)', async () => {
    const plan = (await rows(`load 'pg_overexplain'; explain (debug) select 1`)) as { 'QUERY PLAN': string }[]
    expect(plan.map((r) => r['QUERY PLAN'])).toContain('PlannedStmt:')
  })

  it('pg_stat_statements: preloaded at start, it counts statements', async () => {
    expect(
      await value(`create extension if not exists pg_stat_statements; select 4242; select sum(calls)::int from pg_stat_statements where query = 'select $1'`),
    ).toBeGreaterThanOrEqual(1)
  })

  it('pg_surgery: heap_force_kill removes a tuple', async () => {
    expect(
      await value(`create extension if not exists pg_surgery; create table sg (a int); insert into sg values (1), (2);
        select heap_force_kill('sg'::regclass, array['(0,1)']::tid[]); select count(*)::int from sg`),
    ).toBe(1)
  })

  it('pg_trgm: similarity of word and words', async () => {
    expect(await value(`create extension if not exists pg_trgm; select similarity('word', 'words')`)).toBeCloseTo(0.5714286, 6)
  })

  it('pg_visibility: pg_visibility_map has a row per heap block', async () => {
    expect(
      await value(`create extension if not exists pg_visibility; create table vm (a int); insert into vm select generate_series(1, 1000);
        select count(*)::int from pg_visibility_map('vm')`),
    ).toBe(5)
  })

  it('pg_walinspect: the WAL since the last checkpoint holds its record', async () => {
    await db.exec('create extension if not exists pg_walinspect')
    await db.exec('checkpoint')
    expect(
      await value(`select bool_or(record_type = 'CHECKPOINT_ONLINE')
        from pg_get_wal_records_info((select redo_lsn from pg_control_checkpoint()), pg_current_wal_flush_lsn())`),
    ).toBe(true)
  })

  it("pgcrypto: digest('abc', 'sha256') is the SHA-256 of abc", async () => {
    expect(await value(`create extension if not exists pgcrypto; select encode(digest('abc', 'sha256'), 'hex')`)).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    )
  })

  it('pgcrypto: crypt with a bcrypt salt verifies the password', async () => {
    expect(
      await value(`create extension if not exists pgcrypto;
        select h = crypt('secret', h) and h <> crypt('other', h) from (select crypt('secret', gen_salt('bf', 4)) as h) s`),
    ).toBe(true)
  })

  it('seg: @> tests interval containment', async () => {
    expect(await value(`create extension if not exists seg; select '1 .. 5'::seg @> '2 .. 3'::seg`)).toBe(true)
  })

  it('spi (moddatetime): the trigger stamps the modification time', async () => {
    expect(
      await value(`create extension if not exists moddatetime; create table md (id int, changed timestamptz);
        create trigger md_changed before update on md for each row execute procedure moddatetime(changed);
        insert into md values (1, '2000-01-01'); update md set id = 2; select changed > '2001-01-01' from md`),
    ).toBe(true)
  })

  it('spi: autoinc, insert_username and refint come from the same bundle', async () => {
    expect(
      await value(`create extension if not exists autoinc; create extension if not exists insert_username; create extension if not exists refint;
        select count(*)::int from pg_extension where extname in ('autoinc', 'insert_username', 'refint')`),
    ).toBe(3)
  })

  it('tablefunc: normal_rand returns the rows asked for', async () => {
    expect(await value(`create extension if not exists tablefunc; select count(*)::int from normal_rand(10, 0, 1)`)).toBe(10)
  })

  it('tablefunc: crosstab pivots rows into columns', async () => {
    expect(
      await rows(`create extension if not exists tablefunc;
        select * from crosstab($$select r, c, v from (values ('a', 'x', 1), ('a', 'y', 2), ('b', 'x', 3)) t (r, c, v) order by 1, 2$$,
          $$values ('x'), ('y')$$) as ct (r text, x int, y int) order by r`),
    ).toEqual([
      { r: 'a', x: 1, y: 2 },
      { r: 'b', x: 3, y: null },
    ])
  })

  it('tcn: triggered_change_notification sends a NOTIFY per change', async () => {
    const payloads: string[] = []
    await db.exec(`create extension if not exists tcn; create table tn (id int primary key);
      create trigger tn_notify after insert on tn for each row execute function triggered_change_notification()`)
    const unlisten = await db.listen('tcn', (payload) => payloads.push(payload))
    await db.exec('insert into tn values (7)')
    await unlisten()
    expect(payloads).toEqual([`"tn",I,"id"='7'`])
  })

  it('tsm_system_rows: TABLESAMPLE SYSTEM_ROWS returns that many rows', async () => {
    expect(
      await value(`create extension if not exists tsm_system_rows; create table sr (a int); insert into sr select generate_series(1, 1000);
        select count(*)::int from sr tablesample system_rows(5)`),
    ).toBe(5)
  })

  it('tsm_system_time: TABLESAMPLE SYSTEM_TIME reads a small table whole within its time', async () => {
    expect(
      await value(`create extension if not exists tsm_system_time; create table st (a int); insert into st select generate_series(1, 1000);
        select count(*)::int from st tablesample system_time(10000)`),
    ).toBe(1000)
  })

  it("unaccent: unaccent('Hôtel') is Hotel", async () => {
    expect(await value(`create extension if not exists unaccent; select unaccent('Hôtel')`)).toBe('Hotel')
  })

  it('uuid-ossp: uuid_generate_v4 has the version 4 format', async () => {
    expect(await value(`create extension if not exists "uuid-ossp"; select uuid_generate_v4()::text`)).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    )
  })

  it('uuid-ossp: uuid_generate_v5 is the standard name-based UUID', async () => {
    expect(await value(`create extension if not exists "uuid-ossp"; select uuid_generate_v5(uuid_ns_url(), 'http://example.com')::text`)).toBe(
      '8c9ddcb0-8084-5a7f-a988-1095ab18b5df',
    )
  })
})

describe('side modules', () => {
  // Regression: the bundles' side modules were instantiated all at once, and
  // the glue's check for undefined symbols, run as each one finished, failed
  // on another's half-registered symbols. The module was then compiled again,
  // synchronously, at CREATE EXTENSION, and linked against the first copy's
  // symbol entries, whose data was never relocated; for pgcrypto, digest()
  // failed with "Cipher cannot be initialized" in a few percent of runs.
  it('are all compiled before Postgres starts, none again at CREATE EXTENSION or LOAD', async () => {
    const Compiled = WebAssembly.Module
    let compiledAtLoad = 0
    // Counts synchronous compiles of side modules (they carry a dylink.0
    // section): the path dlopen takes for a module that was not preloaded.
    class CountingModule extends Compiled {
      constructor(bytes: BufferSource) {
        super(bytes)
        if (Compiled.customSections(this, 'dylink.0').length > 0) compiledAtLoad++
      }
    }
    const fresh = await PGlite.create({ extensions: bundles })
    try {
      // PL/pgSQL ships inside the engine, not in a bundle: it loads (and
      // compiles) at first use, which some extension scripts are.
      await fresh.exec('do $$ begin end $$')
      ;(WebAssembly as { Module: typeof WebAssembly.Module }).Module = CountingModule
      await fresh.exec(`create extension amcheck; create extension bloom; create extension btree_gist; create extension citext;
        create extension cube; create extension hstore; create extension pgcrypto; create extension "uuid-ossp"; load 'auto_explain'`)
      expect(await value(`select encode(digest('abc', 'sha256'), 'hex')`, fresh)).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
    } finally {
      ;(WebAssembly as { Module: typeof WebAssembly.Module }).Module = Compiled
      await fresh.close()
    }
    expect(compiledAtLoad).toBe(0)
  })
})

describe('pgcrypto under repeated use', () => {
  const ALGORITHMS = ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'] as const

  /** 100 digests in one statement, each a new OpenSSL digest context, checked against node:crypto. */
  async function expectDigests(instance: PGlite, round: number): Promise<void> {
    const { rows } = await instance.query<{ i: number; h: string }>(
      `select i, encode(digest('round ' || $1::int || ' input ' || i, (array['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'])[1 + i % 6]), 'hex') as h
         from generate_series(1, 100) i order by i`,
      [round],
    )
    expect(rows).toHaveLength(100)
    for (const { i, h } of rows) expect(h, `round ${round}, input ${i}`).toBe(createHash(ALGORITHMS[i % 6]!).update(`round ${round} input ${i}`).digest('hex'))
  }

  // Every bundle, as the side modules' loading order and timing is what broke it.
  it('computes 500 digests right across an instance, its clones and an instance made after others closed', async () => {
    const withCrypto = { extensions: bundles }
    const source = await PGlite.create(withCrypto)
    const open: PGlite[] = [source]
    try {
      await source.exec('create extension if not exists pgcrypto')
      await expectDigests(source, 1)
      const copy = await source.clone()
      open.push(copy)
      await expectDigests(copy, 2)
      const copyOfCopy = await copy.clone()
      open.push(copyOfCopy)
      await expectDigests(copyOfCopy, 3)
      // Modules of closed in-memory instances go back to a pool for reuse:
      // the next instances start in memory other backends ran in.
      for (let i = 0; i < 3; i++) await (await PGlite.create()).close()
      await copy.close()
      const later = await PGlite.create(withCrypto)
      open.push(later)
      await later.exec('create extension if not exists pgcrypto')
      await expectDigests(later, 4)
      await expectDigests(source, 5)
    } finally {
      for (const instance of open) await instance.close()
    }
  })
})

describe('contrib extensions and the instance', () => {
  it('a plain instance has no contrib files, even after one with them started', async () => {
    const plain = await PGlite.create()
    try {
      await expect(plain.exec('create extension pgcrypto')).rejects.toThrow(/extension "pgcrypto" is not available/)
    } finally {
      await plain.close()
    }
  })

  it('a clone keeps the extension working', async () => {
    await db.exec('create extension if not exists pgcrypto')
    const copy = await db.clone()
    try {
      expect((await copy.query(`select encode(digest('abc', 'sha256'), 'hex') as h`)).rows).toEqual([
        { h: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' },
      ])
    } finally {
      await copy.close()
    }
  })

  it('contrib modules and add-ons such as live share the extensions option', async () => {
    const mixed = await PGlite.create({ extensions: { live, pgcrypto: contrib.pgcrypto } })
    try {
      expect(typeof mixed.live.query).toBe('function')
      expect(Object.keys(mixed)).not.toContain('pgcrypto')
      await mixed.exec('create extension pgcrypto')
      expect((await mixed.query(`select encode(digest('', 'sha1'), 'hex') as h`)).rows).toEqual([{ h: 'da39a3ee5e6b4b0d3255bfef95601890afd80709' }])
    } finally {
      await mixed.close()
    }
  })

  it("adds preloaded libraries to the caller's shared_preload_libraries", async () => {
    const db2 = await PGlite.create({
      extensions: { auto_explain: contrib.auto_explain, pg_stat_statements: contrib.pg_stat_statements },
      postgresqlConf: { shared_preload_libraries: 'auto_explain' },
    })
    try {
      expect((await db2.query('show shared_preload_libraries')).rows).toEqual([{ shared_preload_libraries: 'auto_explain,pg_stat_statements' }])
    } finally {
      await db2.close()
    }
  })

  it('refuses a bundle name that is a path', async () => {
    await expect(PGlite.create({ extensions: { bad: { name: 'bad', bundle: '../pglite' } } })).rejects.toMatchObject({ code: 'ASSET_MISSING' })
  })
})

describe('pgvector, from the bundle @electric-sql/pglite-pgvector publishes', () => {
  it('takes the package\'s own extension object as PGlite does; creates the extension, orders by <-> distance, and a query uses its HNSW index', async () => {
    // Its setup names its bundle (a file: URL beside its dist), as PGlite's extension API has it.
    const { vector } = await import('@electric-sql/pglite-pgvector')
    const pg = await PGlite.create({ extensions: { vector } })
    try {
      await pg.exec(`create extension vector; create table items (id int primary key, embedding vector(3))`)
      await pg.exec(`insert into items select g, array[g, g * 2, g * 3]::vector from generate_series(1, 200) g`)
      await pg.exec('create index items_hnsw on items using hnsw (embedding vector_l2_ops)')
      expect(await rows(`select id from items order by embedding <-> '[3.1, 6.2, 9.3]' limit 3`, pg)).toEqual([{ id: 3 }, { id: 4 }, { id: 2 }])
      await pg.exec('set enable_seqscan = off')
      const plan = (await rows(`explain select id from items order by embedding <-> '[3.1, 6.2, 9.3]' limit 3`, pg)) as { 'QUERY PLAN': string }[]
      expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/items_hnsw/)
    } finally {
      await pg.close()
    }
  })
})

describe('add-ons, with the lifecycle of PGlite extensions', () => {
  it('calls setup before the engine starts, then sets the namespace and runs init on the ready instance, and close first at close()', async () => {
    const events: string[] = []
    const addOn = {
      name: 'probe',
      async setup(pg: PGlite) {
        events.push(`setup ready=${pg.ready}`)
        return {
          namespaceObj: { hello: () => 'hi' },
          init: async () => {
            events.push(`init ${(await pg.query<{ n: number }>('select 1 as n')).rows[0]!.n}`)
          },
          close: async () => {
            events.push(`close ${(await pg.query<{ n: number }>('select 2 as n')).rows[0]!.n}`)
          },
        }
      },
    }
    const pg = await PGlite.create({ extensions: { probe: addOn } })
    expect(pg.probe.hello()).toBe('hi')
    await pg.close()
    expect(events).toEqual(['setup ready=false', 'init 1', 'close 2'])
  })

  it('rejects create() when a setup throws, or when its key would hide a PGlite member', async () => {
    const failing = { name: 'bad', setup: () => Promise.reject(new Error('no setup for you')) }
    await expect(PGlite.create({ extensions: { bad: failing } })).rejects.toThrow('no setup for you')
    const hiding = { name: 'query', setup: async () => ({ namespaceObj: {} }) }
    await expect(PGlite.create({ extensions: { query: hiding } })).rejects.toThrow(TypeError)
  })
})
