import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { onUse, PGlite } from '../src/index.js'
import * as contrib from '../src/contrib.js'
import type { ContribExtension } from '../src/contrib.js'

const root = fileURLToPath(new URL('../../../', import.meta.url))

/** Every contrib module the engine ships, made available to CREATE EXTENSION without compiling it ahead. */
const everyBundleOnUse: Record<string, ContribExtension> = Object.fromEntries(
  Object.entries(contrib)
    .filter((entry): entry is [string, ContribExtension] => typeof entry[1] === 'object' && entry[1] !== null && 'bundle' in entry[1])
    .map(([key, extension]) => [key, onUse(extension)]),
)

describe('contrib modules loaded on use (onUse)', () => {
  const opened: PGlite[] = []
  afterAll(async () => {
    await Promise.all(opened.map((db) => db.close()))
  })

  it('lists every bundle in pg_available_extensions and compiles only what CREATE EXTENSION loads', async () => {
    const db = await PGlite.create({ extensions: everyBundleOnUse })
    opened.push(db)
    const { rows } = await db.query<{ name: string }>('select name from pg_available_extensions')
    const available = new Set(rows.map((r) => r.name))
    // Libraries without a control file (auto_explain, passwordcheck...) are for LOAD, not CREATE EXTENSION.
    for (const name of ['hstore', 'pg_trgm', 'citext', 'pgcrypto', 'uuid-ossp', 'cube', 'ltree', 'btree_gist']) expect(available, name).toContain(name)
    expect(available.size).toBeGreaterThan(30)
    const Compiled = WebAssembly.Module
    let sideModules = 0
    // Counts synchronous compiles of side modules (they carry a dylink.0 section).
    class CountingModule extends Compiled {
      constructor(bytes: BufferSource) {
        super(bytes)
        if (Compiled.customSections(this, 'dylink.0').length > 0) sideModules++
      }
    }
    ;(WebAssembly as { Module: typeof WebAssembly.Module }).Module = CountingModule
    try {
      await db.exec('create extension hstore')
    } finally {
      ;(WebAssembly as { Module: typeof WebAssembly.Module }).Module = Compiled
    }
    expect(sideModules).toBe(1)
    expect((await db.query<{ v: string }>(`select ('a=>1, b=>2'::hstore) -> 'b' as v`)).rows).toEqual([{ v: '2' }])
  })

  it('uses an index an extension provides, in a database reopened from its directory', async () => {
    const dir = tempDir()
    let db = await PGlite.create(dir, { extensions: everyBundleOnUse })
    await db.exec(`create extension pg_trgm; create table words (w text);
      insert into words select 'word' || g from generate_series(1, 2000) g;
      create index words_trgm on words using gin (w gin_trgm_ops); analyze words`)
    await db.close()
    db = await PGlite.create(dir, { extensions: everyBundleOnUse })
    opened.push(db)
    await db.exec('set enable_seqscan = off')
    const plan = (await db.query<{ 'QUERY PLAN': string }>(`explain select w from words where w like '%rd199%'`)).rows.map((r) => r['QUERY PLAN']).join('\n')
    expect(plan).toContain('words_trgm')
    expect((await db.query(`select w from words where w like '%rd1999%'`)).rows).toEqual([{ w: 'word1999' }])
  })

  it('lets a script await a third and fourth instance with contrib modules while the others stay open', async () => {
    // The pool's module made ahead waited on an unref'd timer: with nothing
    // else keeping Node up, the script ended (exit 13) inside the third create.
    const script = join(tempDir(), 'many.mts')
    writeFileSync(
      script,
      `import { PGlite } from ${JSON.stringify(join(root, 'packages/pglite/src/index.ts'))}
import { hstore } from ${JSON.stringify(join(root, 'packages/pglite/src/contrib.ts'))}
const open = []
for (let i = 0; i < 4; i++) {
  const db = await PGlite.create({ extensions: { hstore } })
  await db.exec('create extension hstore')
  open.push(db)
}
const { rows } = await open[3].query("select ('k=>' || 4)::hstore -> 'k' as v")
for (const db of open) await db.close()
console.log(JSON.stringify(rows))
`,
    )
    const tsx = join(root, 'node_modules', '.bin', 'tsx')
    const out = await new Promise<string>((resolve, reject) => {
      execFile(tsx, [script], { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${String(err)}\n${stderr}`)) : resolve(stdout.trim())))
    })
    expect(JSON.parse(out)).toEqual([{ v: '4' }])
  }, 180_000)
})
