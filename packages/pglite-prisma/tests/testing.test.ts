import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { PrismaPGlite, TestDatabase, diffSchema, snapshot } from '../src/index.js'
import { PrismaClient } from './generated/client.js'
import { SCHEMA } from './helpers.js'

const seed = async (db: PGlite): Promise<void> => {
  await db.query(`INSERT INTO "User" (email, name) VALUES ('seed@x.io', 'Seed')`)
}

// The file's shared database: every test starts from its snapshot, so the
// tests pass in any order (none of them changes the snapshot itself).
const testDb = await TestDatabase.create({ schema: SCHEMA, setup: seed })
const prisma = new PrismaClient({ adapter: testDb.adapter })
const work = tempDir('pglite-prisma-testing-')

beforeEach(() => testDb.reset())

afterAll(async () => {
  await prisma.$disconnect()
  await testDb.close()
})

async function emails(client: PrismaClient): Promise<string[]> {
  return (await client.user.findMany({ orderBy: { id: 'asc' }, select: { email: true } })).map((u) => u.email)
}

describe('TestDatabase', () => {
  it('starts with the schema and the setup data', async () => {
    expect(await emails(prisma)).toEqual(['seed@x.io'])
  })

  it('reset brings back the snapshot, and the Prisma client follows it', async () => {
    await prisma.user.create({ data: { email: 'temp@x.io' } })
    await prisma.user.deleteMany({ where: { email: 'seed@x.io' } })
    const before = testDb.db
    await testDb.reset()
    expect(testDb.db).not.toBe(before)
    expect(await emails(prisma)).toEqual(['seed@x.io'])
  })

  it('restarts sequences on reset, so ids repeat across tests', async () => {
    const first = await prisma.user.create({ data: { email: 'one@x.io' } })
    await testDb.reset()
    const again = await prisma.user.create({ data: { email: 'one@x.io' } })
    expect(again.id).toBe(first.id)
  })

  it('with prepareNext, resets to the snapshot once the next copy is ready, and again without waiting for it', async () => {
    const own = await TestDatabase.create({ schema: SCHEMA, setup: seed, prepareNext: true })
    const client = new PrismaClient({ adapter: own.adapter })
    try {
      await client.user.create({ data: { email: 'gone@x.io' } })
      await own.ready()
      const prepared = own.db
      await own.reset()
      expect(own.db).not.toBe(prepared)
      // A swap: the old copy is closed after the reset returned, not before.
      expect(prepared.closed).toBe(false)
      expect(await emails(client)).toEqual(['seed@x.io'])
      // The next copy is still being made in the background: this reset waits for it.
      await client.user.create({ data: { email: 'gone-too@x.io' } })
      await own.reset()
      expect(await emails(client)).toEqual(['seed@x.io'])
      await own.ready()
      expect(prepared.closed).toBe(true)
    } finally {
      await client.$disconnect()
      await own.close()
    }
  })

  it('by default a reset closes the old copy first (its engine module serves the new one); the new copy is the snapshot', async () => {
    const own = await TestDatabase.create({ schema: SCHEMA, setup: seed })
    try {
      for (let round = 0; round < 3; round++) {
        const old = own.db
        await old.query(`INSERT INTO "User" (email) VALUES ('round${round}@x.io')`)
        // Nothing is made ahead of time to wait for: no second engine module.
        await own.ready()
        await own.reset()
        expect(old.closed).toBe(true)
        expect(own.db).not.toBe(old)
        expect((await own.db.query<{ email: string }>('SELECT email FROM "User" ORDER BY id')).rows).toEqual([{ email: 'seed@x.io' }])
      }
    } finally {
      await own.close()
    }
  })

  it('snapshot() makes the current contents what reset returns to', async () => {
    // A database of its own: changing the snapshot of the shared one would leak into other tests.
    const own = await TestDatabase.create({ schema: SCHEMA, setup: seed })
    const client = new PrismaClient({ adapter: own.adapter })
    try {
      await client.user.create({ data: { email: 'baseline@x.io' } })
      await own.snapshot()
      await client.user.create({ data: { email: 'later@x.io' } })
      await own.reset()
      expect(await emails(client)).toEqual(['seed@x.io', 'baseline@x.io'])
    } finally {
      await client.$disconnect()
      await own.close()
    }
  })

  it('applies a migrations folder, recording it in _prisma_migrations', async () => {
    const migrationsDir = join(work, 'migrations')
    mkdirSync(join(migrationsDir, '20240101000000_init'), { recursive: true })
    const initSql = await diffSchema({ to: { schema: SCHEMA } })
    writeFileSync(join(migrationsDir, '20240101000000_init', 'migration.sql'), initSql)
    const own = await TestDatabase.create({ migrationsDir, setup: seed })
    const client = new PrismaClient({ adapter: own.adapter })
    try {
      expect(await emails(client)).toEqual(['seed@x.io'])
      const history = await own.db.query<{ migration_name: string; checksum: string }>('SELECT migration_name, checksum FROM _prisma_migrations')
      expect(history.rows).toEqual([{ migration_name: '20240101000000_init', checksum: createHash('sha256').update(initSql).digest('hex') }])
      await client.user.create({ data: { email: 'temp@x.io' } })
      await own.reset()
      expect(await emails(client)).toEqual(['seed@x.io'])
    } finally {
      await client.$disconnect()
      await own.close()
    }
  })

  it('refuses `schema` and `migrationsDir` together', async () => {
    await expect(TestDatabase.create({ schema: SCHEMA, migrationsDir: work })).rejects.toThrow(TypeError)
  })

  it('caches the SQL of a schema in `cacheDir` and builds later databases from that file', async () => {
    const cacheDir = join(work, 'cache')
    // A schema text no other test uses, so neither the process nor the disk has its SQL yet.
    const schema = `${SCHEMA}\n// cache test ${process.pid} ${Date.now()}\n`
    const file = join(cacheDir, `${createHash('sha256').update(schema).digest('hex')}.sql`)
    const first = await TestDatabase.create({ schema, cacheDir })
    await first.close()
    expect(readFileSync(file, 'utf8')).toBe(await diffSchema({ to: { schema } }))

    // The file is what later databases run: a marker table added to it shows up.
    const other = `${schema}// and another\n`
    const otherFile = join(cacheDir, `${createHash('sha256').update(other).digest('hex')}.sql`)
    writeFileSync(otherFile, `${readFileSync(file, 'utf8')}\nCREATE TABLE from_cache (id int);\n`)
    const cached = await TestDatabase.create({ schema: other, cacheDir })
    try {
      expect((await cached.db.query(`SELECT to_regclass('from_cache')::text AS t`)).rows).toEqual([{ t: 'from_cache' }])
    } finally {
      await cached.close()
    }
  })

  it('starts a later process (a later test file) from the saved schema state, without running the schema SQL again', async () => {
    const dir = join(work, 'state')
    mkdirSync(dir)
    const cacheDir = join(dir, 'sql')
    const coreCache = join(dir, 'core')
    const schema = `${SCHEMA}\n// state test ${process.pid} ${Date.now()}\n`
    const sqlFile = join(cacheDir, `${createHash('sha256').update(schema).digest('hex')}.sql`)
    const script = join(dir, 'child.mts')
    writeFileSync(
      script,
      `import { TestDatabase } from ${JSON.stringify(fileURLToPath(new URL('../src/index.ts', import.meta.url)))}
const testDb = await TestDatabase.create({ schema: ${JSON.stringify(schema)}, cacheDir: ${JSON.stringify(cacheDir)} })
await testDb.db.query(\`INSERT INTO "User" (email, name) VALUES ('child@x.io', 'Child')\`)
await testDb.reset()
const { rows } = await testDb.db.query(\`SELECT to_regclass('marker')::text AS marker, to_regclass('"User"')::text AS users, (SELECT count(*)::int FROM "User") AS n\`)
await testDb.close()
console.log(JSON.stringify(rows[0]))
`,
    )
    const tsx = join(fileURLToPath(new URL('../../../', import.meta.url)), 'node_modules', '.bin', 'tsx')
    const run = (): Promise<unknown> =>
      new Promise((resolve, reject) => {
        execFile(tsx, [script], { timeout: 120_000, env: { ...process.env, PGWASM_CACHE_DIR: coreCache } }, (err, stdout, stderr) =>
          err ? reject(new Error(stderr || String(err))) : resolve(JSON.parse(stdout.trim().split('\n').pop()!)),
        )
      })
    expect(await run()).toEqual({ marker: null, users: '"User"', n: 0 })
    // From now on the SQL file would add a marker table, if anything ran it.
    writeFileSync(sqlFile, `${readFileSync(sqlFile, 'utf8')}\nCREATE TABLE marker (id int);\n`)
    expect(await run()).toEqual({ marker: null, users: '"User"', n: 0 })
    // The control: without the saved state, the (changed) SQL file is what runs.
    rmSync(coreCache, { recursive: true, force: true })
    expect(await run()).toEqual({ marker: 'marker', users: '"User"', n: 0 })
  }, 240_000)

  it('writes no cache file with `cacheDir: false`', async () => {
    const cacheDir = join(work, 'no-cache')
    const schema = `${SCHEMA}\n// no cache ${process.pid} ${Date.now()}\n`
    const own = await TestDatabase.create({ schema, cacheDir: false })
    await own.close()
    expect(existsSync(cacheDir) && readdirSync(cacheDir).length > 0).toBe(false)
  })
})

describe('snapshot()', () => {
  it('restores independent copies of a database as it was', async () => {
    const db = await PGlite.create()
    try {
      await db.exec('CREATE TABLE t (n int); INSERT INTO t VALUES (1)')
      const snap = await snapshot(db)
      await db.exec('INSERT INTO t VALUES (2)')
      const a = await snap.restore()
      const b = await snap.restore()
      await a.exec('INSERT INTO t VALUES (3)')
      expect((await a.query('SELECT n FROM t ORDER BY n')).rows).toEqual([{ n: 1 }, { n: 3 }])
      expect((await b.query('SELECT n FROM t ORDER BY n')).rows).toEqual([{ n: 1 }])
      await Promise.all([a.close(), b.close(), snap.close()])
    } finally {
      await db.close()
    }
  })

  it('gives each restored copy its own Prisma client', async () => {
    const snap = await snapshot(testDb.db)
    const copy = await snap.restore()
    const other = new PrismaClient({ adapter: new PrismaPGlite(copy) })
    await other.user.create({ data: { email: 'only-in-copy@x.io' } })
    expect(await other.user.count({ where: { email: 'only-in-copy@x.io' } })).toBe(1)
    expect(await prisma.user.count({ where: { email: 'only-in-copy@x.io' } })).toBe(0)
    await other.$disconnect()
    await copy.close()
    await snap.close()
  })
})
