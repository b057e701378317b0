// The page of tests/browser.test.ts, bundled with plain esbuild options
// (`--bundle --format=esm --platform=browser`): what an app author runs.
import { DatabaseError, DataDirLockedError, PGlite } from '@pgwasm/pglite'
import { PGliteWorker } from '@pgwasm/pglite/worker'
import { hstore } from '@pgwasm/pglite/contrib'
import { pg_trgm } from '@pgwasm/pglite/contrib/pg_trgm'

interface ErrorInfo {
  name: string
  message: string
  code?: string
  isDatabaseError: boolean
}

function describe(err: unknown): ErrorInfo {
  const e = err as { name?: string; message?: string; code?: string }
  return { name: e.name ?? 'unknown', message: e.message ?? String(err), code: e.code, isDatabaseError: err instanceof DatabaseError }
}

const open = new Map<string, PGlite>()

/** `$1` rows of 1 kB into table `big`, in one statement: past 32 MB at 40k rows. */
const LOAD_BIG = 'insert into big select g, repeat(md5(g::text), 32) from generate_series(1, $1::int) g'

const api = {
  /** relaxedDurability on idb://: the setting is on, and what was written is there after close and reopen. */
  async idbRelaxed(name: string) {
    const db = await PGlite.create(`idb://${name}`, { relaxedDurability: true })
    const setting = (await db.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit
    await db.exec('create table r (v int)')
    for (let i = 0; i < 5; i++) await db.query('insert into r values ($1)', [i])
    await db.close()
    const again = await PGlite.create(`idb://${name}`)
    const { rows } = await again.query<{ n: number }>('select count(*)::int as n from r')
    await again.close()
    return { setting, count: rows[0]!.n }
  },

  /**
   * A table loaded past 32 MB in one statement (MEMFS files that large grow
   * differently), on `dataDir`: the row count after a reopen, and the size of
   * a dump of it made in the page.
   */
  async bigTable(dataDir: string, rows: number) {
    const db = await PGlite.create(dataDir)
    await db.exec('create table big (id int primary key, pad text)')
    await db.query(LOAD_BIG, [rows])
    const { rows: size } = await db.query<{ bytes: number }>("select pg_relation_size('big')::float8 as bytes")
    const dump = await db.dumpDataDir('none')
    await db.close()
    const again = await PGlite.create(dataDir)
    const { rows: back } = await again.query<{ n: number; pad: string }>('select count(*)::int as n, min(pad) as pad from big')
    await again.close()
    return { tableBytes: size[0]!.bytes, dumpBytes: dump.size, ...back[0]! }
  },

  /** The side-module attack and the statements that used to end the engine, as page SQL would send them. */
  async hostileSql(module: number[]) {
    const db = await PGlite.create()
    const codes: Record<string, string | undefined> = {}
    const attempt = async (name: string, sql: string): Promise<void> => {
      try {
        await db.exec(sql)
        codes[name] = 'ok'
      } catch (err) {
        codes[name] = describe(err).code
      }
    }
    const { rows } = await db.query<{ oid: number }>('select lo_from_bytea(0, $1) as oid', [Uint8Array.from(module)])
    await db.query(`select lo_export($1, '/tmp/x.so')`, [rows[0]!.oid])
    await attempt('load', `load '/tmp/x.so'`)
    await attempt('languageC', `create function f() returns int language c as '/tmp/x.so', 'f'`)
    await attempt('exitOnError', 'set exit_on_error = on')
    await attempt('recursion', `create function r(int) returns int language sql as $$ select r($1 + 1) $$; select r(1)`)
    await attempt('jsonb', `select '${'['.repeat(10000)}${']'.repeat(10000)}'::jsonb`)
    const after = (await db.query<{ n: number }>('select 1 as n')).rows[0]!.n
    await db.close()
    return { codes, after, ran: (globalThis as { __pgwasmHostile?: string }).__pgwasmHostile ?? null, title: document.title }
  },

  async memory() {
    const t0 = performance.now()
    const db = await PGlite.create()
    const createMs = performance.now() - t0
    await db.exec('CREATE TABLE t (id serial PRIMARY KEY, v text)')
    await db.query('INSERT INTO t (v) VALUES ($1), ($2)', ['a', 'b'])
    const { rows } = await db.query<{ id: number; v: string }>('SELECT id, v FROM t ORDER BY id')
    const t1 = performance.now()
    const second = await PGlite.create()
    const secondMs = performance.now() - t1
    const one = await second.query<{ n: number }>('SELECT 1 AS n')
    const pool = (await db.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0]!.shared_buffers
    await db.close()
    await second.close()
    const custom = await PGlite.create({ postgresqlConf: { shared_buffers: '32MB' } })
    const customPool = (await custom.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0]!.shared_buffers
    await custom.close()
    return { rows, createMs, secondMs, second: one.rows[0]!.n, pool, customPool }
  },

  /**
   * An engine death nobody foresaw under an idb:// database (the engine's
   * memory overwritten, as an engine bug would): committed rows stay, the
   * open transaction's do not, and the instance goes on.
   */
  async idbEngineDeath(name: string) {
    const db = await PGlite.create(`idb://${name}`)
    await db.exec("create table kept (v text); insert into kept values ('committed')")
    const died = await db
      .transaction(async (tx) => {
        await tx.query("insert into kept values ('in the transaction')")
        const heap = db.Module.HEAPU8
        heap.fill(0xff, 4096, Math.min(heap.length, 64 << 20))
        await tx.query('select 1')
      })
      .then(
        () => undefined,
        (err: unknown) => ({ ...describe(err), reopened: (err as { reopened?: boolean }).reopened }),
      )
    const after = (await db.query<{ v: string }>('select v from kept order by v')).rows.map((r) => r.v)
    await db.query("insert into kept values ('after')")
    await db.close()
    const again = await PGlite.create(`idb://${name}`)
    const stored = (await again.query<{ v: string }>('select v from kept order by v')).rows.map((r) => r.v)
    await again.close()
    return { died, after, stored }
  },

  /** Contrib extensions in the page: trigram search (with a GIN index) and hstore, on an idb:// database across a reopen. */
  async contrib(name: string) {
    const db = await PGlite.create(`idb://${name}`, { extensions: { pg_trgm, hstore } })
    await db.exec('create extension pg_trgm; create extension hstore')
    await db.exec("create table words (w text); insert into words select 'word' || g from generate_series(1, 500) g")
    await db.exec('create index words_trgm on words using gin (w gin_trgm_ops)')
    const similarity = (await db.query<{ s: number }>("select similarity('postgres', 'postgis')::float8 as s")).rows[0]!.s
    await db.close()
    const again = await PGlite.create(`idb://${name}`, { extensions: { pg_trgm, hstore } })
    await again.exec('set enable_seqscan = off')
    const plan = (await again.query<{ 'QUERY PLAN': string }>("explain select w from words where w % 'word42'")).rows.map((r) => r['QUERY PLAN']).join('\n')
    const found = (await again.query<{ w: string }>("select w from words where w % 'word42' order by similarity(w, 'word42') desc, w limit 2")).rows.map((r) => r.w)
    const value = (await again.query<{ v: string }>("select ('a=>1, b=>2'::hstore -> 'b') as v")).rows[0]!.v
    await again.close()
    const vector = { name: 'vector', bundle: 'vector', bundlePath: '/vector.tar.gz' }
    const vdb = await PGlite.create({ extensions: { vector } })
    await vdb.exec('create extension vector; create table items (id int primary key, embedding vector(3))')
    await vdb.exec('insert into items select g, array[g, g * 2, g * 3]::vector from generate_series(1, 200) g')
    await vdb.exec('create index items_hnsw on items using hnsw (embedding vector_l2_ops); set enable_seqscan = off')
    const nearestSql = "select id from items order by embedding <-> '[3.1, 6.2, 9.3]' limit 3"
    const nearest = (await vdb.query<{ id: number }>(nearestSql)).rows.map((r) => r.id)
    const vectorPlan = (await vdb.query<{ 'QUERY PLAN': string }>(`explain ${nearestSql}`)).rows.map((r) => r['QUERY PLAN']).join('\n')
    // A second in-memory database with the same bundle restores the first one's start (the same postmaster start time).
    const started = async (db: PGlite): Promise<string> => (await db.query<{ t: string }>('select pg_postmaster_start_time()::text as t')).rows[0]!.t
    const vdb2 = await PGlite.create({ extensions: { vector } })
    const restored = (await started(vdb2)) === (await started(vdb))
    await vdb.close()
    await vdb2.exec('create extension vector')
    const distance = (await vdb2.query<{ d: number }>("select '[1,2,3]'::vector <-> '[1,2,5]' as d")).rows[0]!.d
    await vdb2.close()
    return { similarity, plan, found, value, nearest, vectorPlan, restored, distance }
  },

  async idbWrite(name: string, values: string[]) {
    const t0 = performance.now()
    const db = open.get(name) ?? (await PGlite.create(`idb://${name}`))
    const openMs = performance.now() - t0
    open.set(name, db)
    await db.exec('CREATE TABLE IF NOT EXISTS notes (id serial PRIMARY KEY, body text NOT NULL)')
    for (const v of values) await db.query('INSERT INTO notes (body) VALUES ($1)', [v])
    // Left open on purpose: the test reloads the page without a clean close.
    return { openMs }
  },

  async idbRead(name: string, close = true) {
    const t0 = performance.now()
    const db = open.get(name) ?? (await PGlite.create(`idb://${name}`))
    const openMs = performance.now() - t0
    open.set(name, db)
    const { rows } = await db.query<{ body: string }>('SELECT body FROM notes ORDER BY id')
    if (close) {
      await db.close()
      open.delete(name)
    }
    return { bodies: rows.map((r) => r.body), openMs }
  },

  async idbTiming(name: string, n: number) {
    const db = await PGlite.create(`idb://${name}`)
    await db.exec('CREATE TABLE IF NOT EXISTS kv (id int PRIMARY KEY, v text)')
    const times: number[] = []
    for (let i = 0; i < n; i++) {
      const t0 = performance.now()
      await db.query('INSERT INTO kv VALUES ($1, $2)', [i, `value ${i}`])
      await db.query('SELECT v FROM kv WHERE id = $1', [i])
      times.push(performance.now() - t0)
    }
    await db.close()
    times.sort((a, b) => a - b)
    return { median: times[Math.floor(times.length / 2)]! }
  },

  /**
   * Empties and vacuums a table the template ships (VACUUM truncates its
   * file: a resize of a file stored as part of the base image), adds a
   * table, and leaves the database open for a reload. The table is
   * information_schema's sql_features: the system catalogs' own rows
   * cannot be deleted by SQL.
   */
  async idbTruncateCatalog(name: string) {
    const db = await PGlite.create(`idb://${name}`)
    open.set(name, db)
    const before = (await db.query<{ n: number }>('select count(*)::int as n from information_schema.sql_features')).rows[0]!.n
    // One statement per exec: VACUUM cannot run in the implicit transaction of a multi-statement string.
    for (const sql of ['delete from information_schema.sql_features', 'vacuum information_schema.sql_features', 'checkpoint']) await db.exec(sql)
    await db.exec(`create table after_vacuum (v text); insert into after_vacuum values ('kept')`)
    const pages = (await db.query<{ n: number }>(`select pg_relation_size('information_schema.sql_features')::int as n`)).rows[0]!.n
    return { before, pages }
  },

  async idbReadCatalog(name: string) {
    const db = await PGlite.create(`idb://${name}`)
    const features = (await db.query<{ n: number }>('select count(*)::int as n from information_schema.sql_features')).rows[0]!.n
    const kept = (await db.query<{ v: string }>('select v from after_vacuum')).rows.map((r) => r.v)
    const classes = (await db.query<{ n: number }>('select count(*)::int as n from pg_class')).rows[0]!.n
    await db.close()
    return { features, kept, classes }
  },

  async secondOpener(name: string) {
    try {
      const db = await PGlite.create(`idb://${name}`)
      await db.close()
      return { opened: true }
    } catch (err) {
      return { opened: false, error: describe(err), isLocked: err instanceof DataDirLockedError }
    }
  },

  async failingQuery() {
    const db = await PGlite.create()
    try {
      await db.exec('CREATE TABLE u (k int PRIMARY KEY)')
      await db.query('INSERT INTO u VALUES (1)')
      await db.query('INSERT INTO u VALUES (1)')
      return { rejected: false }
    } catch (err) {
      const after = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM u')
      return { rejected: true, error: describe(err), after: after.rows[0]!.n }
    } finally {
      await db.close()
    }
  },

  /**
   * Statements that never call out of the engine, each under statement_timeout (the interrupt
   * polls, engine/loading/interrupt-polls.ts), and a statement past maxMemory: what each rejected with.
   */
  async runaways() {
    const db = await PGlite.create({ maxMemory: 256 * 1024 * 1024 })
    try {
      await db.exec(`create table t as select g from generate_series(1, 1000) g; set statement_timeout = '200ms'`)
      const stopped: { code?: string; message?: string }[] = []
      for (const sql of [
        'select count(*) from t a, t b, t c',
        'do $$ begin loop end loop; end $$',
        'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r where n < 0',
        `select repeat('a', 999) ~ '^(a*)(a*)(a*)\\1\\2\\3\\1\\2\\3\\1x?$'`,
      ]) {
        const err = await db.query(sql).then(() => undefined, (e: unknown) => e as { code?: string; message?: string })
        stopped.push({ code: err?.code, message: err?.message })
      }
      await db.exec('reset statement_timeout')
      const memory = await db.query(`select length(repeat(md5('x'), 10000000))`).then(() => undefined, (e: unknown) => (e as { code?: string }).code)
      const table = await db.query(`create table junk as select repeat(md5(g::text), 32) as s from generate_series(1, 5000000) g`).then(() => undefined, (e: unknown) => (e as { code?: string }).code)
      const after = (await db.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n
      return { stopped, memory, table, after }
    } finally {
      await db.close()
    }
  },

  /** Opens a dump made in Node into idb://, checks it, changes it, and dumps it back (base64). */
  async roundTrip(url: string) {
    const dump = await (await fetch(url)).blob()
    const db = await PGlite.create('idb://from-node', { loadDataDir: dump })
    const before = await db.query<{ n: number; total: string; big: number; md5: string }>(
      `select (select count(*)::int from items) as n, (select sum(price)::text from items) as total,
              (select length(data) from blobs where id = 1) as big, (select md5(data) from blobs where id = 1) as md5`,
    )
    const usesIndex = await db.query<{ plan: string }>(`explain select * from items where name = 'item 7'`)
    const next = await db.query<{ v: number }>(`select nextval('ticket') as v`)
    await db.query(`insert into items (name, price) values ('from the browser', 1.5)`)
    const back = await db.dumpDataDir('gzip')
    await db.close()
    const bytes = new Uint8Array(await back.arrayBuffer())
    let binary = ''
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
    return { ...before.rows[0]!, plan: usesIndex.rows.map((r) => Object.values(r)[0]).join('\n'), next: Number(next.rows[0]!.v), dump: btoa(binary) }
  },

  /** Writes through a module worker on idb://, reads back, and returns a failing query's error as the page sees it. */
  /** An opfs-ahp:// database in a module worker: writes, then the rows as a new worker reads them. */
  async opfsViaWorker(name: string, values: string[]) {
    // Terminated at close: each worker of these rows holds a whole database in memory.
    const pg = await PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir: `opfs-ahp://${name}`, terminateOnClose: true })
    await pg.exec('create table if not exists w (id serial primary key, v text not null)')
    for (const v of values) await pg.query('insert into w (v) values ($1)', [v])
    const { rows } = await pg.query<{ v: string }>('select v from w order by id')
    await pg.close()
    return rows.map((r) => r.v)
  },

  /**
   * `rounds` commits of 100 rows of 1 kB each (past a generation's size
   * limit, so flushes start new generations from the tree in memory); what a
   * new worker then reads, and the files left.
   */
  async opfsCompact(name: string, rounds: number) {
    const open = () => PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir: `opfs-ahp://${name}`, terminateOnClose: true })
    const pg = await open()
    await pg.exec('create table big (id int primary key, pad text)')
    for (let r = 0; r < rounds; r++) await pg.query("insert into big select g, repeat('x', 1000) from generate_series($1::int, $1::int + 99) g", [r * 100])
    await pg.query('insert into big values (-1, $1)', ['after'])
    await pg.close()
    const again = await open()
    const { rows } = await again.query<{ n: number; last: string }>('select count(*)::int as n, max(pad) filter (where id = -1) as last from big')
    await again.close()
    const dir = await (await (await navigator.storage.getDirectory()).getDirectoryHandle('pgwasm')).getDirectoryHandle(encodeURIComponent(name))
    const files: { name: string; size: number }[] = []
    for await (const [key, handle] of (dir as unknown as { entries(): AsyncIterable<[string, FileSystemFileHandle]> }).entries()) {
      files.push({ name: key, size: (await handle.getFile()).size })
    }
    return { ...rows[0]!, files }
  },

  /** Loads `rows` rows of 1 kB in one statement through a worker on opfs-ahp://<name>; the count and table size a new worker reads. */
  async opfsLoad(name: string, rows: number) {
    const open = () => PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir: `opfs-ahp://${name}`, terminateOnClose: true })
    const pg = await open()
    await pg.exec('create table if not exists big (id int primary key, pad text)')
    await pg.query(LOAD_BIG, [rows])
    await pg.close()
    const again = await open()
    const { rows: back } = await again.query<{ n: number; bytes: number }>("select count(*)::int as n, pg_relation_size('big')::float8 as bytes from big")
    await again.close()
    return back[0]!
  },

  /** Writes `values` through a worker on `dataDir` and leaves the database open (for a browser closed under it). */
  async writeAndLeaveOpen(dataDir: string, values: string[]) {
    const pg = await PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir })
    await pg.exec('create table if not exists w (id serial primary key, v text not null)')
    for (const v of values) await pg.query('insert into w (v) values ($1)', [v])
    ;(globalThis as unknown as { leftOpen?: unknown[] }).leftOpen = [...((globalThis as unknown as { leftOpen?: unknown[] }).leftOpen ?? []), pg]
  },

  /** Appends bytes to the newest generation file of opfs-ahp://<name>, as a write a crash tore would leave them. */
  async opfsTear(name: string, bytes: number[]) {
    const root = await (await navigator.storage.getDirectory()).getDirectoryHandle('pgwasm')
    const dir = await root.getDirectoryHandle(encodeURIComponent(name))
    const names: string[] = []
    for await (const key of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) names.push(key)
    const newest = names.sort((a, b) => Number(b.slice(4)) - Number(a.slice(4)))[0]!
    const file = await dir.getFileHandle(newest)
    const size = (await file.getFile()).size
    const writable = await file.createWritable({ keepExistingData: true })
    await writable.write({ type: 'write', position: size, data: new Uint8Array(bytes) })
    await writable.close()
    return { file: newest, size }
  },

  /** opfs-ahp:// on the page itself: refused (it needs a dedicated worker). */
  async opfsOnPage(name: string) {
    return PGlite.create(`opfs-ahp://${name}`).then(
      async (db) => {
        await db.close()
        return undefined
      },
      (err: unknown) => describe(err),
    )
  },

  async viaWorker(name: string, values: string[]) {
    const pg = await PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir: `idb://${name}` })
    await pg.exec('create table if not exists w (id serial primary key, v text not null)')
    for (const v of values) await pg.query('insert into w (v) values ($1)', [v])
    let error: ErrorInfo | undefined
    try {
      await pg.query('select 1 / 0')
    } catch (err) {
      error = describe(err)
    }
    const { rows } = await pg.query<{ v: string }>('select v from w order by id')
    await pg.close()
    return { rows: rows.map((r) => r.v), error }
  },

  /** A worker on idb:// called one statement at a time, reporting which channel the calls took. */
  async viaWorkerShared(name: string, count: number) {
    const pg = await PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir: `idb://${name}` })
    await pg.exec('create table if not exists s (id int primary key, v text not null, b bytea, at timestamptz)')
    const start = (await pg.query<{ n: number }>('select count(*)::int as n from s')).rows[0]!.n
    const at = new Date('2024-05-06T07:08:09.123Z')
    for (let i = start + 1; i <= start + count; i++) await pg.query('insert into s values ($1, $2, $3, $4)', [i, `välue ${i}`, new Uint8Array([i & 255, 7]), at])
    let error: ErrorInfo | undefined
    try {
      await pg.query('insert into s (id, v) values (1, $1)', ['again'])
    } catch (err) {
      error = describe(err)
    }
    const { rows } = await pg.query<{ id: number; v: string; b: Uint8Array; at: Date }>('select * from s order by id')
    const stats = pg._internalStats()
    const usesSharedMemory = pg.usesSharedMemory
    await pg.close()
    return {
      isolated: globalThis.crossOriginIsolated,
      usesSharedMemory,
      stats,
      error,
      rows: rows.map((r) => ({ id: r.id, v: r.v, b: Array.from(r.b), at: r.at.toISOString() })),
    }
  },

  /**
   * What Postgres reads only when a query needs it, on the page or through a
   * worker: a time zone, text search, a client encoding, PL/pgSQL, ICU.
   */
  async filesOnUse(where: 'page' | 'worker') {
    const db = where === 'page' ? await PGlite.create() : await PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }))
    const value = async (sql: string) => (await db.query<{ v: unknown }>(sql)).rows[0]!.v
    await db.exec(`set time zone 'Europe/Paris'`)
    const paris = await value(`select to_char('2024-07-01 12:00:00+00'::timestamptz, 'HH24:MI TZ') as v`)
    const zones = await value('select count(*)::int as v from pg_timezone_names')
    const tsvector = await value(`select to_tsvector('english', 'The quick brown foxes')::text as v`)
    const latin1 = await value(`select encode(convert_to('é', 'LATIN1'), 'hex') as v`)
    await db.exec(`create function twice(int) returns int language plpgsql as $$ begin return $1 * 2; end $$`)
    const plpgsql = await value('select twice(21) as v')
    const icu = await value(`select 'a' < 'B' collate "und-x-icu" as v`)
    await db.close()
    return { paris, zones, tsvector, latin1, plpgsql, icu }
  },

  /** A pack the server does not have: the statement that needed it fails with an ERROR, the database goes on. */
  async missingPack() {
    const db = await PGlite.create()
    let error: ErrorInfo | undefined
    try {
      await db.exec(`set time zone 'Europe/Paris'`)
    } catch (err) {
      error = describe(err)
    }
    const after = (await db.query<{ n: number }>('select 1 + 1 as n')).rows[0]!.n
    await db.close()
    return { error, after }
  },

  /** A database made by initdb in the page (not the shipped template): its program and files come on use. */
  async initdbInPage() {
    const db = await PGlite.create({ initdbArgs: ['--no-data-checksums'] })
    await db.exec(`create table t (v text); insert into t values ('made by initdb')`)
    const { rows } = await db.query<{ v: string }>('select v from t')
    await db.close()
    return rows.map((r) => r.v)
  },

  async withAssetBase(base: string) {
    try {
      const db = await PGlite.create({ assetBaseUrl: base })
      const { rows } = await db.query<{ n: number }>('SELECT 2 AS n')
      await db.close()
      return { ok: true, n: rows[0]!.n }
    } catch (err) {
      return { ok: false, error: describe(err) }
    }
  },
}

Object.assign(globalThis, { pgwasmTest: api })
export type TestApi = typeof api
