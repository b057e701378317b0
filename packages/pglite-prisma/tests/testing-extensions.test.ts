import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import type { PGlite } from '@pgwasm/pglite'
import { citext, pg_trgm } from '@pgwasm/pglite/contrib'
import { TestDatabase, diffSchema } from '../src/index.js'
import { PrismaClient } from './generated/client.js'
import { SCHEMA } from './helpers.js'

/**
 * A TestDatabase whose migrations create extensions (what a Prisma schema
 * with `extensions = [pg_trgm, citext]` migrates to): its copies, the
 * createCached state of a later process included, have the extensions'
 * types, operators, indexes and functions without running the migrations
 * again.
 */

const work = mkdtempSync(join(tmpdir(), 'pglite-prisma-extensions-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

const extensions = { pg_trgm, citext }

/** A migrations folder: the schema's tables, then the extensions, a citext column and a trigram index. */
async function migrationsWithExtensions(name: string): Promise<string> {
  const dir = join(work, name)
  mkdirSync(join(dir, '20240101000000_init'), { recursive: true })
  const sql = `CREATE EXTENSION pg_trgm;
CREATE EXTENSION citext;
${await diffSchema({ to: { schema: SCHEMA } })}
ALTER TABLE "User" ALTER COLUMN "email" TYPE citext;
CREATE INDEX "User_name_trgm" ON "User" USING gin ("name" gin_trgm_ops);`
  writeFileSync(join(dir, '20240101000000_init', 'migration.sql'), sql)
  return dir
}

/** The extensions at work in `db`, none of their functions called before. */
async function expectExtensionsWork(db: PGlite): Promise<void> {
  await db.exec('SET enable_seqscan = off')
  const byName = `SELECT email FROM "User" WHERE name LIKE '%nnabel%'`
  const plan = (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${byName}`)).rows.map((r) => r['QUERY PLAN']).join('\n')
  expect(plan).toContain('User_name_trgm')
  expect((await db.query(byName)).rows).toEqual([{ email: 'Annabel@X.io' }])
  const ci = await db.query<{ email: string; close: boolean }>(`SELECT email, similarity(name, 'Anabel') > 0.3 AS close FROM "User" WHERE email = 'ANNABEL@X.IO'`)
  expect(ci.rows).toEqual([{ email: 'Annabel@X.io', close: true }])
  await db.exec('RESET enable_seqscan')
}

describe('TestDatabase with extensions', () => {
  it('restores copies with the extensions working, through a reset and through Prisma, with or without a setup', async () => {
    const migrationsDir = await migrationsWithExtensions('in-process')
    for (const setup of [undefined, async (db: PGlite) => void (await db.query(`INSERT INTO "User" (email, name) VALUES ('seed@x.io', 'Seed')`))]) {
      const testDb = await TestDatabase.create({ migrationsDir, pglite: { extensions }, cacheDir: false, ...(setup ? { setup } : {}) })
      const prisma = new PrismaClient({ adapter: testDb.adapter })
      const migrated = async (): Promise<unknown> => (await testDb.db.query('SELECT finished_at::text AS at FROM _prisma_migrations')).rows
      const migratedFirst = await migrated()
      try {
        for (let round = 0; round < 3; round++) {
          await testDb.reset()
          // Each copy is the state the migrations left once, not the migrations run again.
          expect(await migrated()).toEqual(migratedFirst)
          await prisma.user.create({ data: { email: 'Annabel@X.io', name: 'Annabel Lee' } })
          await prisma.user.create({ data: { email: 'bob@x.io', name: 'Bob' } })
          await expectExtensionsWork(testDb.db)
          // The citext column ignores case for the unique index too.
          await expect(prisma.user.create({ data: { email: 'BOB@x.io' } })).rejects.toThrow()
          expect((await prisma.user.findMany({ orderBy: { id: 'asc' }, select: { email: true } })).map((u) => u.email)).toEqual(
            setup ? ['seed@x.io', 'Annabel@X.io', 'bob@x.io'] : ['Annabel@X.io', 'bob@x.io'],
          )
        }
      } finally {
        await prisma.$disconnect()
        await testDb.close()
      }
    }
  })

  it('starts a later process from the saved state: the migrations do not run again there', async () => {
    const migrationsDir = await migrationsWithExtensions('across-processes')
    const script = join(work, 'child.mts')
    writeFileSync(
      script,
      `import { TestDatabase } from ${JSON.stringify(fileURLToPath(new URL('../src/index.ts', import.meta.url)))}
import { citext, pg_trgm } from ${JSON.stringify(fileURLToPath(new URL('../../pglite/dist/contrib.js', import.meta.url)))}
const testDb = await TestDatabase.create({ migrationsDir: ${JSON.stringify(migrationsDir)}, pglite: { extensions: { pg_trgm, citext } }, cacheDir: false })
await testDb.db.query(\`INSERT INTO "User" (email, name) VALUES ('Annabel@X.io', 'Annabel Lee')\`)
await testDb.db.exec('SET enable_seqscan = off')
const explain = (await testDb.db.query(\`EXPLAIN SELECT email FROM "User" WHERE name LIKE '%nnabel%'\`)).rows.map((r) => r['QUERY PLAN']).join(' ')
const out = {
  migrated: (await testDb.db.query('SELECT finished_at::text AS at FROM _prisma_migrations')).rows[0].at,
  usesIndex: explain.includes('User_name_trgm'),
  found: (await testDb.db.query(\`SELECT email, similarity(name, 'Anabel') > 0.3 AS close FROM "User" WHERE email = 'ANNABEL@x.IO'\`)).rows,
}
await testDb.close()
console.log(JSON.stringify(out))
`,
    )
    const cache = join(work, 'core-cache')
    const tsx = join(fileURLToPath(new URL('../../../', import.meta.url)), 'node_modules', '.bin', 'tsx')
    const run = (): Promise<{ migrated: string; usesIndex: boolean; found: unknown[] }> =>
      new Promise((resolve, reject) => {
        execFile(tsx, [script], { timeout: 240_000, cwd: fileURLToPath(new URL('..', import.meta.url)), env: { ...process.env, PGWASM_CACHE_DIR: cache } }, (err, stdout, stderr) =>
          err ? reject(new Error(stderr || String(err))) : resolve(JSON.parse(stdout.trim().split('\n').pop()!)),
        )
      })
    const first = await run()
    const expected = { usesIndex: true, found: [{ email: 'Annabel@X.io', close: true }] }
    expect(first).toMatchObject(expected)
    const second = await run()
    expect(second).toMatchObject(expected)
    // The same migration record: the second process restored the first one's state instead of migrating.
    expect(second.migrated).toBe(first.migrated)
  }, 600_000)
})
