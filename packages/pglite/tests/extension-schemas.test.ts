import { execFile } from 'node:child_process'
import { readdirSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { vector } from '@electric-sql/pglite-pgvector'
import { citext, hstore, pg_trgm, pgcrypto } from '../src/contrib.js'
import { PGlite } from '../src/index.js'
import { tempDir } from '@pgwasm/test-support/temp-dirs'

/**
 * A schema that ran CREATE EXTENSION, restored by `createCached` (in the
 * process and from the disk cache in another one) and by `clone()`, works
 * as the database its setup built: operators, the indexes the extensions
 * provide (the planner uses them), and functions no instance called before
 * the copy was taken (linked in the restored module at their first call).
 */

const root = fileURLToPath(new URL('../../../', import.meta.url))
/** pgvector's ESM entry, for a child script outside the workspace. */
const pgvectorEntry = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite-pgvector')), 'index.js')).href
const extensions = { pg_trgm, hstore, pgcrypto, citext, vector }

const SCHEMA = `create extension pg_trgm; create extension hstore; create extension pgcrypto; create extension citext; create extension vector;
  create table doc (id int primary key, body text not null, email citext not null, tags hstore, embedding vector(3));
  insert into doc select g, 'document number ' || g || case when g % 50 = 0 then ' about a quick brown fox' else '' end,
    'Writer' || g || '@Example.com', ('kind=>' || case when g % 2 = 0 then 'even' else 'odd' end)::hstore, array[g, g * 2, g * 3]::vector
    from generate_series(1, 400) g;
  create index doc_trgm on doc using gin (body gin_trgm_ops);
  create index doc_hnsw on doc using hnsw (embedding vector_l2_ops);
  analyze doc`

const opened: PGlite[] = []
afterAll(async () => {
  await Promise.all(opened.map((db) => db.close()))
})

async function keep(db: Promise<PGlite>): Promise<PGlite> {
  const d = await db
  opened.push(d)
  return d
}

async function startTime(db: PGlite): Promise<string> {
  return (await db.query<{ t: string }>('select pg_postmaster_start_time()::text as t')).rows[0]!.t
}

async function plan(db: PGlite, sql: string): Promise<string> {
  const { rows } = await db.query<{ 'QUERY PLAN': string }>(`explain ${sql}`)
  return rows.map((r) => r['QUERY PLAN']).join('\n')
}

/** Everything the schema's extensions provide, checked in `db` (nothing of it was called by the setup). */
async function expectSchemaWorks(db: PGlite): Promise<void> {
  await db.exec('set enable_seqscan = off')
  const trigram = "select id from doc where body like '%quick brown%'"
  expect(await plan(db, trigram)).toContain('doc_trgm')
  expect((await db.query<{ id: number }>(trigram)).rows.map((r) => r.id).sort((a, b) => a - b)).toEqual([50, 100, 150, 200, 250, 300, 350, 400])
  const fuzzy = await db.query<{ found: boolean; close: boolean }>(
    "select bool_or(id = 7) as found, bool_and(similarity(body, 'document numbr 7') >= 0.3) as close from doc where body % 'document numbr 7'",
  )
  expect(fuzzy.rows).toEqual([{ found: true, close: true }])
  const nearest = "select id from doc order by embedding <-> '[10,20,30]' limit 3"
  expect(await plan(db, nearest)).toContain('doc_hnsw')
  expect((await db.query<{ id: number }>(nearest)).rows.map((r) => r.id).sort((a, b) => a - b)).toEqual([9, 10, 11])
  const { rows } = await db.query<{ id: number; kind: string; digest: boolean; hmac: number }>(
    `select id, tags -> 'kind' as kind, digest(body, 'sha256') = sha256(convert_to(body, 'UTF8')) as digest,
       length(hmac(body, 'key', 'sha1')) as hmac
     from doc where email = 'WRITER42@example.COM'`,
  )
  expect(rows).toEqual([{ id: 42, kind: 'even', digest: true, hmac: 20 }])
  const crypt = await db.query<{ ok: boolean }>("select crypt('secret', h) = h as ok from (select crypt('secret', gen_salt('md5')) as h) s")
  expect(crypt.rows).toEqual([{ ok: true }])
  expect((await db.query<{ n: number }>("select count(*)::int as n from doc where tags @> 'kind=>odd'")).rows[0]!.n).toBe(200)
  await db.exec('reset enable_seqscan')
}

describe('a schema that created extensions, restored', () => {
  it('by createCached later in the process: the setup does not run again, and indexes, operators and functions work, first calls included', async () => {
    const runs: string[] = []
    const key = `extension-schema-${Date.now()}`
    const setup = async (db: PGlite): Promise<void> => {
      runs.push('setup')
      await db.exec(SCHEMA)
    }
    const first = await keep(PGlite.createCached(key, setup, { extensions, templateCacheDir: false }))
    const second = await keep(PGlite.createCached(key, setup, { extensions, templateCacheDir: false }))
    expect(runs).toEqual(['setup'])
    await expectSchemaWorks(second)
    // A restored copy goes its own way: rows, and extensions too.
    await second.exec("insert into doc values (401, 'only in the second about a quick brown fox', 'x@y.z', '', '[1,1,1]'); drop extension hstore cascade")
    expect((await first.query<{ n: number }>("select count(*)::int as n from doc where body like '%quick brown%'")).rows[0]!.n).toBe(8)
    expect((await first.query<{ kind: string }>("select tags -> 'kind' as kind from doc where id = 3")).rows).toEqual([{ kind: 'odd' }])
    const third = await keep(PGlite.createCached(key, setup, { extensions, templateCacheDir: false }))
    expect((await third.query<{ n: number }>('select count(*)::int as n from doc')).rows[0]!.n).toBe(400)
    await expectSchemaWorks(third)
  })

  it('by clone(), of the instance that ran the setup and of a restored one, again after the copy was closed', async () => {
    const source = await keep(PGlite.create({ extensions }))
    await source.exec(SCHEMA)
    const copy = await source.clone()
    try {
      // A memory copy (not a copy of the files, started anew): the source's start time.
      expect(await startTime(copy)).toBe(await startTime(source))
      await expectSchemaWorks(copy)
      await copy.exec('delete from doc where id > 10')
      expect((await source.query<{ n: number }>('select count(*)::int as n from doc')).rows[0]!.n).toBe(400)
    } finally {
      await copy.close()
    }
    // Into the module the closed copy gave back, and a copy of a copy.
    const again = await keep(source.clone())
    const nested = await keep(again.clone())
    expect(await startTime(nested)).toBe(await startTime(source))
    await expectSchemaWorks(again)
    await expectSchemaWorks(nested)
    await expectSchemaWorks(source)
  })

  it('by createCached in a new process, from the disk cache: no setup there, and the schema works', async () => {
    const cacheDir = tempDir('pgwasm-ext-schema-')
    const script = join(cacheDir, 'child.mts')
    const src = (path: string): string => JSON.stringify(join(root, 'packages/pglite', path))
    writeFileSync(
      script,
      `import { PGlite } from ${src('src/index.ts')}
import { citext, hstore, pg_trgm, pgcrypto } from ${src('src/contrib.ts')}
const { vector } = await import(${JSON.stringify(pgvectorEntry)})
let ran = 0
const db = await PGlite.createCached('extension-schema-across-processes', async (db) => {
  ran++
  await db.exec(${JSON.stringify(SCHEMA)})
}, { extensions: { pg_trgm, hstore, pgcrypto, citext, vector }, templateCacheDir: ${JSON.stringify(cacheDir)} })
await db.exec('set enable_seqscan = off')
const explain = async (sql) => (await db.query('explain ' + sql)).rows.map((r) => r['QUERY PLAN']).join(' ')
const out = {
  ran,
  trigramPlan: await explain("select id from doc where body like '%quick brown%'"),
  trigram: (await db.query("select id from doc where body like '%quick brown%'")).rows.map((r) => r.id).sort((a, b) => a - b),
  hnswPlan: await explain("select id from doc order by embedding <-> '[10,20,30]' limit 3"),
  nearest: (await db.query("select id from doc order by embedding <-> '[10,20,30]' limit 3")).rows.map((r) => r.id).sort((a, b) => a - b),
  found: (await db.query("select id, tags -> 'kind' as kind, length(digest(body, 'sha1')) as sha1 from doc where email = 'writer8@EXAMPLE.com'")).rows,
}
await db.close()
console.log(JSON.stringify(out))
`,
    )
    const tsx = join(root, 'node_modules', '.bin', 'tsx')
    const run = (): Promise<{ ran: number; trigramPlan: string; trigram: number[]; hnswPlan: string; nearest: number[]; found: unknown[] }> =>
      new Promise((resolve, reject) => {
        execFile(tsx, [script], { timeout: 240_000, cwd: join(root, 'packages/pglite') }, (err, stdout, stderr) =>
          err ? reject(new Error(stderr || String(err))) : resolve(JSON.parse(stdout.trim().split('\n').pop()!)),
        )
      })
    const expected = { trigram: [50, 100, 150, 200, 250, 300, 350, 400], nearest: [9, 10, 11], found: [{ id: 8, kind: 'even', sha1: 20 }] }
    const first = await run()
    expect(first).toMatchObject({ ran: 1, ...expected })
    const written = readdirSync(cacheDir).filter((f) => f.endsWith('.bin'))
    const second = await run()
    expect(second).toMatchObject({ ran: 0, ...expected })
    expect(second.trigramPlan).toContain('doc_trgm')
    expect(second.hnswPlan).toContain('doc_hnsw')
    // The second process wrote nothing: it restored what the first saved.
    expect(readdirSync(cacheDir).filter((f) => f.endsWith('.bin')).sort()).toEqual(written.sort())
  }, 600_000)
})
