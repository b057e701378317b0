/**
 * One start-up measurement in a fresh process. Bundled to plain JS and run
 * with bare `node`, it prints one JSON line: { samples (ms), rssMB }.
 *   startup-child <ours|pglite> first
 *   startup-child <ours|pglite> later <count>
 *   startup-child <ours|pglite> clone <count>
 *   startup-child <ours|pglite> prepare <dir>
 *   startup-child <ours|pglite> open <dir>
 *   startup-child <ours|pglite> many <count>   (samples: [RSS in MB with <count> databases open])
 *   startup-child <ours|pglite> schema          (ours: PGlite.createCached; PGlite: create() + exec of the schema)
 *   startup-child ours testdb                   (@pgwasm/pglite-prisma's TestDatabase.create with a Prisma schema)
 *   startup-child <ours|pglite> ext-first         (create() with the five extensions, incl. import)
 *   startup-child <ours|pglite> ext-later <count> (create() with them after a discarded first)
 *   startup-child <ours|pglite> ext-clone <count> (clone() of a database using them)
 *   startup-child <ours|pglite> ext-schema <count> (a schema that creates them and a table, after a discarded first:
 *                                               ours: PGlite.createCached; PGlite: create() + the schema's SQL)
 *   startup-child <ours|pglite> ext-schema-first (that schema first in the process, incl. import; ours: its state saved by an earlier process)
 *   startup-child <ours|pglite> schema-later <count> (the 12-table schema as ext-schema does it, after a discarded first)
 *   startup-child <ours|pglite|native> bulk <copy|ctas> <rows> <memory|dir path|native url|server>
 *                                               (samples: [ms of one load of <rows> rows of 1 kB])
 */
import { PRISMA_SCHEMA, SCHEMA_TABLES } from './prisma-schema.js'
import { copyThroughNative, copyThroughServer } from './server-copy.js'

interface Db {
  query(sql: string): Promise<{ rows: unknown[] }>
  exec(sql: string): Promise<unknown>
  clone(): Promise<Db>
  close(): Promise<void>
}
interface Ctor {
  create(dataDir?: string | { extensions: Record<string, unknown> }): Promise<Db>
  createCached?(key: string, setup: (db: Db) => Promise<void>, options?: { extensions: Record<string, unknown> }): Promise<Db>
}

const SCHEMA_SQL = Array.from(
  { length: SCHEMA_TABLES },
  (_, i) => `create table m${i} (id serial primary key, name text not null, qty int not null, created_at timestamp(3) not null default current_timestamp);
create index m${i}_name on m${i} (name);`,
).join('\n')
const TABLE_COUNT_SQL = "select count(*)::int as n from information_schema.tables where table_schema = 'public'"

const [impl, mode, arg, ...rest] = process.argv.slice(2)

async function load(): Promise<Ctor> {
  const mod = (impl === 'ours' ? await import('@pgwasm/pglite') : await import('@electric-sql/pglite')) as unknown as { PGlite: Ctor }
  return mod.PGlite
}

function rssMB(): number {
  // maxRSS is in kilobytes: the process's peak resident set so far.
  return process.resourceUsage().maxRSS / 1024
}

async function check(db: Db, sql: string, expected: number): Promise<void> {
  const { rows } = await db.query(sql)
  const value = Number(Object.values(rows[0] as Record<string, unknown>)[0])
  if (value !== expected) throw new Error(`${sql} returned ${value}, expected ${expected}`)
}

/** The extensions of the ext rows: four contrib bundles and pgvector's add-on, each library's own objects. */
async function fiveExtensions(): Promise<Record<string, unknown>> {
  const base = impl === 'ours' ? '@pgwasm/pglite/contrib' : '@electric-sql/pglite/contrib'
  const out: Record<string, unknown> = {}
  for (const name of ['pg_trgm', 'hstore', 'pgcrypto', 'citext']) out[name] = ((await import(`${base}/${name}`)) as Record<string, unknown>)[name]
  out.vector = ((await import('@electric-sql/pglite-pgvector')) as { vector: unknown }).vector
  return out
}
const USE_EXTENSIONS = 'create extension pg_trgm; create extension hstore; create extension pgcrypto; create extension citext; create extension vector'
// pgcrypto is checked with gen_salt(): on PGlite 0.5.16 a later instance's digest() fails ("Cipher cannot be initialized").
const EXTENSIONS_WORK = `select (similarity('abc', 'abc') = 1 and ('a=>1'::hstore)->'a' = '1' and 'A'::citext = 'a'
  and length(gen_salt('md5')) > 0 and ('[1,2]'::vector <-> '[1,2]') = 0)::int as ok`

/** Creates the five extensions in `db` and checks that each works. */
async function useFiveExtensions(db: Db): Promise<void> {
  await db.exec(USE_EXTENSIONS)
  await check(db, EXTENSIONS_WORK, 1)
}

/** One row of the COPY data: an id and 1,000 bytes. */
const PAD = 'y'.repeat(1000)
const CTAS_SQL = (rows: number) => `create table a as select g as id, repeat('x', 1000) as v from generate_series(1, ${rows}) g`

/** COPY text for `rows` rows, in parts of 10,000 rows (a whole 1M-row text is past a string's length limit). */
function copyParts(rows: number): string[] {
  const parts: string[] = []
  for (let from = 1; from <= rows; from += 10_000) {
    const lines: string[] = []
    for (let i = from; i < Math.min(from + 10_000, rows + 1); i++) lines.push(`${i}\t${PAD}\n`)
    parts.push(lines.join(''))
  }
  return parts
}

/** Times one bulk load (only the statement) into a new table; checks the row count after. */
async function bulkLoad(kind: 'copy' | 'ctas', rows: number, where: string): Promise<number> {
  if (impl === 'native' && rest[2] === 'stdin') return copyThroughNative(where, copyParts(rows), rows)
  if (impl === 'native') {
    const { default: pg } = await import('pg')
    const client = new pg.Client({ connectionString: where })
    await client.connect()
    try {
      await client.query('drop table if exists a; drop table if exists b; create table b (id int, v text)')
      let file: string | undefined
      let dir: string | undefined
      if (kind === 'copy') {
        const { writeFileSync, appendFileSync, mkdtempSync, chmodSync } = await import('node:fs')
        const { tmpdir } = await import('node:os')
        const { join } = await import('node:path')
        dir = mkdtempSync(join(tmpdir(), 'pgwasm-bulk-'))
        // The server runs as another user: it must be able to read the file.
        chmodSync(dir, 0o755)
        file = join(dir, 'rows.tsv')
        writeFileSync(file, '')
        for (const part of copyParts(rows)) appendFileSync(file, part)
      }
      let ms: number
      try {
        const t = performance.now()
        await client.query(kind === 'copy' ? `copy b from '${file}'` : CTAS_SQL(rows))
        ms = performance.now() - t
      } finally {
        // Up to 1 GB per sample: every run used to leave its file in the temp folder.
        if (dir) (await import('node:fs')).rmSync(dir, { recursive: true, force: true })
      }
      const { rows: counted } = await client.query(`select count(*)::int as n from ${kind === 'copy' ? 'b' : 'a'}`)
      if (counted[0].n !== rows) throw new Error(`loaded ${counted[0].n} rows, expected ${rows}`)
      await client.query('drop table if exists a; drop table if exists b')
      return ms
    } finally {
      await client.end()
    }
  }
  if (where === 'server') return copyThroughServer(copyParts(rows), rows)
  const db = (await PGlite.create(where === 'memory' ? undefined : where)) as Db & {
    query(sql: string, params: unknown[], options: { blob: Blob }): Promise<{ rows: unknown[] }>
  }
  await db.exec('create table b (id int, v text)')
  const blob = kind === 'copy' ? new Blob(copyParts(rows)) : undefined
  const t = performance.now()
  if (blob) await db.query(`copy b from '/dev/blob'`, [], { blob })
  else await db.exec(CTAS_SQL(rows))
  const ms = performance.now() - t
  await check(db, `select count(*) from ${kind === 'copy' ? 'b' : 'a'}`, rows)
  await db.close()
  return ms
}

const samples: number[] = []
const t0 = performance.now()
const PGlite = await load()
if (mode === 'first') {
  const db = await PGlite.create()
  samples.push(performance.now() - t0)
  await check(db, 'select 1 as one', 1)
  const rss = rssMB()
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rss }))
} else if (mode === 'later') {
  // The first instance pays for compiling the module; later ones show the per-instance cost.
  await (await PGlite.create()).close()
  for (let i = 0; i < Number(arg); i++) {
    const t = performance.now()
    const db = await PGlite.create()
    samples.push(performance.now() - t)
    await check(db, 'select 1 as one', 1)
    await db.close()
  }
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'clone') {
  const db = await PGlite.create()
  await db.exec(`create table t (id int primary key, a text); insert into t select g, 'row ' || g from generate_series(1, 1000) g`)
  for (let i = 0; i < Number(arg); i++) {
    const t = performance.now()
    const copy = await db.clone()
    samples.push(performance.now() - t)
    await check(copy, 'select count(*) from t', 1000)
    await copy.close()
  }
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'prepare') {
  const db = await PGlite.create(arg)
  await db.exec(`create table t (id int primary key, a text); insert into t select g, 'row ' || g from generate_series(1, 1000) g`)
  await db.close()
  console.log(JSON.stringify({ samples: [], rssMB: rssMB() }))
} else if (mode === 'open') {
  const t = performance.now()
  const db = await PGlite.create(arg)
  samples.push(performance.now() - t)
  await check(db, 'select count(*) from t', 1000)
  // With the first query: what the open left undone (catalog caches a new backend fills) shows here.
  const withQuery = performance.now() - t
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB(), withQuery }))
} else if (mode === 'many') {
  // Every database stays open and holds a little data, as a test suite's per-file databases do.
  const dbs: Db[] = []
  for (let i = 0; i < Number(arg); i++) {
    const db = await PGlite.create()
    await db.exec(`create table t (id int primary key, a text); insert into t select g, 'row ' || g from generate_series(1, 1000) g`)
    dbs.push(db)
  }
  for (const db of dbs) await check(db, 'select count(*) from t', 1000)
  const rss = process.memoryUsage().rss / (1024 * 1024)
  for (const db of dbs) await db.close()
  console.log(JSON.stringify({ samples: [rss], rssMB: rssMB() }))
} else if (mode === 'schema') {
  // The schema a test file starts from: saved once and restored by us, run again by PGlite (it has no saved state).
  const db = PGlite.createCached
    ? await PGlite.createCached('pgwasm-bench-schema-v1', (d) => d.exec(SCHEMA_SQL).then(() => undefined))
    : await PGlite.create().then(async (d) => (await d.exec(SCHEMA_SQL), d))
  samples.push(performance.now() - t0)
  await check(db, TABLE_COUNT_SQL, SCHEMA_TABLES)
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'testdb') {
  if (impl !== 'ours') throw new Error('testdb is @pgwasm/pglite-prisma only')
  const { TestDatabase } = await import('@pgwasm/pglite-prisma')
  const testDb = await TestDatabase.create({ schema: PRISMA_SCHEMA })
  samples.push(performance.now() - t0)
  await check(testDb.db, TABLE_COUNT_SQL, SCHEMA_TABLES)
  await testDb.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'ext-first') {
  const db = await PGlite.create({ extensions: await fiveExtensions() })
  samples.push(performance.now() - t0)
  await useFiveExtensions(db)
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'ext-later') {
  const extensions = await fiveExtensions()
  await (await PGlite.create({ extensions })).close()
  for (let i = 0; i < Number(arg); i++) {
    const t = performance.now()
    const db = await PGlite.create({ extensions })
    samples.push(performance.now() - t)
    await useFiveExtensions(db)
    await db.close()
  }
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'ext-schema' || mode === 'ext-schema-first' || mode === 'schema-later') {
  const ext = mode !== 'schema-later'
  const extensions = ext ? await fiveExtensions() : {}
  const schema = ext ? `${USE_EXTENSIONS}; create table t (id int primary key, a text, h hstore, e vector(3), c citext)` : SCHEMA_SQL
  // One key for every process: the first saves the state (in the disk cache too), later ones restore it.
  const key = ext ? 'pgwasm-bench-ext-schema-v1' : 'pgwasm-bench-schema-v1'
  const make = async (): Promise<Db> => {
    if (PGlite.createCached) return PGlite.createCached(key, (db) => db.exec(schema).then(() => undefined), { extensions })
    const db = await PGlite.create({ extensions })
    await db.exec(schema)
    return db
  }
  const verify = async (db: Db): Promise<void> => {
    if (ext) await check(db, EXTENSIONS_WORK, 1)
    await check(db, ext ? 'select count(*)::int from t' : TABLE_COUNT_SQL, ext ? 0 : SCHEMA_TABLES)
  }
  if (mode === 'ext-schema-first') {
    const db = await make()
    samples.push(performance.now() - t0)
    await verify(db)
    await db.close()
  } else {
    await (await make()).close()
    for (let i = 0; i < Number(arg); i++) {
      const t = performance.now()
      const db = await make()
      samples.push(performance.now() - t)
      await verify(db)
      await db.close()
    }
  }
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'ext-clone') {
  const db = await PGlite.create({ extensions: await fiveExtensions() })
  await db.exec(`${USE_EXTENSIONS}; create table t (id int primary key, a text, h hstore, e vector(3)); insert into t select g, 'row ' || g, 'k=>v', array[g, g, g]::vector from generate_series(1, 1000) g`)
  for (let i = 0; i < Number(arg); i++) {
    const t = performance.now()
    const copy = await db.clone()
    samples.push(performance.now() - t)
    await check(copy, 'select count(*) from t', 1000)
    await check(copy, EXTENSIONS_WORK, 1)
    await copy.close()
  }
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'bulk') {
  samples.push(await bulkLoad(arg as 'copy' | 'ctas', Number(rest[0]), rest[1]!))
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else {
  throw new Error(`unknown mode ${mode}`)
}
// Engines can keep timers alive; the line is printed, so leave now.
process.exit(0)
