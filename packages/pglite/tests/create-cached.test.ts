import { execFile } from 'node:child_process'
import { readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { PGlite } from '../src/index.js'
import { citext, hstore, pg_trgm } from '../src/contrib.js'

const root = fileURLToPath(new URL('../../../', import.meta.url))
const opened: PGlite[] = []
afterAll(async () => {
  await Promise.all(opened.map((db) => db.close()))
})

/** A setup that records each run and makes an enum, its array type and rows. */
function schemaSetup(runs: string[], label: string) {
  return async (db: PGlite): Promise<void> => {
    runs.push(label)
    await db.exec(`create type mood as enum ('ok', 'sad');
      create table note (id serial primary key, body text not null, moods mood[] not null default '{}');
      insert into note (body, moods) values ('${label}', '{ok,sad}')`)
  }
}

async function keep(db: Promise<PGlite>): Promise<PGlite> {
  const d = await db
  opened.push(d)
  return d
}

describe('PGlite.createCached', () => {
  it('runs setup once per key; a later call starts from the saved state, independent of the first', async () => {
    const cacheDir = tempDir('pgwasm-cached-')
    const runs: string[] = []
    const key = `notes-${Date.now()}`
    const first = await keep(PGlite.createCached(key, schemaSetup(runs, 'one'), { templateCacheDir: cacheDir }))
    await first.exec("insert into note (body) values ('only in the first')")
    const second = await keep(PGlite.createCached(key, schemaSetup(runs, 'two'), { templateCacheDir: cacheDir }))
    expect(runs).toEqual(['one'])
    // The saved state is what setup left, not what the first instance did later.
    const { rows } = await second.query<{ body: string; moods: string[] }>('select body, moods from note order by id')
    // The enum's array type is parsed without a refreshArrayTypes() call.
    expect(rows).toEqual([{ body: 'one', moods: ['ok', 'sad'] }])
    await second.query("insert into note (body, moods) values ($1, $2)", ['param', ['sad']])
    expect((await second.query('select count(*)::int as n from note')).rows).toEqual([{ n: 2 }])
    expect((await first.query('select count(*)::int as n from note')).rows).toEqual([{ n: 2 }])
    // Another key is another state.
    await keep(PGlite.createCached(`${key}-other`, schemaSetup(runs, 'three'), { templateCacheDir: cacheDir }))
    expect(runs).toEqual(['one', 'three'])
  })

  it('keeps the state of a database whose setup created contrib extensions: later calls restore it, extensions working, without setup', async () => {
    const runs: string[] = []
    const key = `contrib-${Date.now()}`
    const extensions = { hstore, citext, pg_trgm }
    const setup = async (db: PGlite): Promise<void> => {
      runs.push('setup')
      await db.exec(`create extension hstore; create extension citext; create extension pg_trgm;
        create type tone as enum ('low', 'high');
        create table tag (id int primary key, name citext not null, attrs hstore, tones tone[]);
        insert into tag values (1, 'Alpha', 'color=>red', '{low,high}');
        create index tag_trgm on tag using gin ((name::text) gin_trgm_ops)`)
    }
    const first = await keep(PGlite.createCached(key, setup, { extensions }))
    await first.exec(`insert into tag values (2, 'only in the first', null, '{}')`)
    const second = await keep(PGlite.createCached(key, setup, { extensions }))
    const third = await keep(PGlite.createCached(key, setup, { extensions }))
    expect(runs).toEqual(['setup'])
    for (const db of [second, third]) {
      const { rows } = await db.query<{ id: number; same: boolean; color: string; tones: string[]; close: boolean }>(
        `select id, name = 'ALPHA' as same, attrs -> 'color' as color, tones, similarity(name::text, 'alpha') > 0.5 as close from tag order by id`,
      )
      expect(rows).toEqual([{ id: 1, same: true, color: 'red', tones: ['low', 'high'], close: true }])
    }
    // Each restored copy is its own database.
    await second.exec(`insert into tag values (3, 'only in the second', 'a=>1', '{high}')`)
    expect((await third.query('select count(*)::int as n from tag')).rows).toEqual([{ n: 1 }])
    expect((await second.query(`select attrs -> 'a' as a from tag where id = 3`)).rows).toEqual([{ a: '1' }])
  })

  it('saves the state on disk: a new process restores it without running setup', async () => {
    const cacheDir = tempDir('pgwasm-cached-')
    const script = join(cacheDir, 'child.mts')
    writeFileSync(
      script,
      `import { PGlite } from ${JSON.stringify(join(root, 'packages/pglite/src/index.ts'))}
let ran = 0
const db = await PGlite.createCached('across-processes', async (db) => {
  ran++
  await db.exec("create type mood as enum ('ok', 'sad'); create table t (moods mood[]); insert into t values ('{sad}')")
}, { templateCacheDir: ${JSON.stringify(cacheDir)} })
const { rows } = await db.query('select moods from t')
await db.close()
console.log(JSON.stringify({ ran, rows }))
`,
    )
    const tsx = join(root, 'node_modules', '.bin', 'tsx')
    const run = (): Promise<unknown> =>
      new Promise((resolve, reject) => {
        execFile(tsx, [script], { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(JSON.parse(stdout.trim()))))
      })
    expect(await run()).toEqual({ ran: 1, rows: [{ moods: ['sad'] }] })
    const entries = readdirSync(cacheDir).filter((f) => f.endsWith('.bin'))
    expect(await run()).toEqual({ ran: 0, rows: [{ moods: ['sad'] }] })
    // The second process added nothing: it read what the first saved.
    expect(readdirSync(cacheDir).filter((f) => f.endsWith('.bin')).sort()).toEqual(entries.sort())
  }, 180_000)

  it('keys the state by the options that shape the database', async () => {
    const runs: string[] = []
    const key = `by-options-${Date.now()}`
    await keep(PGlite.createCached(key, schemaSetup(runs, 'postgres'), { templateCacheDir: false }))
    const other = await keep(PGlite.createCached(key, schemaSetup(runs, 'other'), { templateCacheDir: false, database: 'template1' }))
    expect(runs).toEqual(['postgres', 'other'])
    expect((await other.query('select current_database() as db, body from note')).rows).toEqual([{ db: 'template1', body: 'other' }])
  })

  it('refuses a bad key, a setup that is not a function and a directory dataDir, with a TypeError', async () => {
    const setup = async (): Promise<void> => {}
    await expect(PGlite.createCached('', setup)).rejects.toThrow(TypeError)
    await expect(PGlite.createCached(42 as unknown as string, setup)).rejects.toThrow(/key/)
    await expect(PGlite.createCached('k', 'create table t()' as unknown as () => Promise<void>)).rejects.toThrow(/setup/)
    await expect(PGlite.createCached('k', setup, { dataDir: tempDir() })).rejects.toThrow(/memory:\/\//)
  })

  it('saves nothing when setup fails or leaves a transaction open; the next call runs setup again', async () => {
    const key = `failing-${Date.now()}`
    const runs: string[] = []
    await expect(
      PGlite.createCached(key, async (db) => {
        runs.push('throws')
        await db.exec('create table half (id int)')
        throw new Error('seed failed')
      }),
    ).rejects.toThrow('seed failed')
    await expect(
      PGlite.createCached(key, async (db) => {
        runs.push('open transaction')
        await db.exec('begin; create table half (id int)')
      }),
    ).rejects.toThrow(/transaction open/)
    const db = await keep(PGlite.createCached(key, schemaSetup(runs, 'good')))
    expect(runs).toEqual(['throws', 'open transaction', 'good'])
    expect((await db.query("select count(*)::int as n from pg_class where relname = 'half'")).rows).toEqual([{ n: 0 }])
  })
})
