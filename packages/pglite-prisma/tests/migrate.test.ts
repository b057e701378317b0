import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { MigrationError, PrismaPGlite, SchemaEngineError, applyMigrations, diffSchema, pushSchema } from '../src/index.js'
import { PrismaClient } from './generated/client.js'
import { SCHEMA } from './helpers.js'

const work = tempDir('pglite-prisma-migrate-')
let initSql = ''

/** A migrations folder with the given migrations (name -> SQL), as `prisma migrate dev` lays it out. */
function migrationsFolder(name: string, migrations: Record<string, string>): string {
  const dir = join(work, name)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'migration_lock.toml'), 'provider = "postgresql"\n')
  for (const [migration, sql] of Object.entries(migrations)) {
    mkdirSync(join(dir, migration), { recursive: true })
    writeFileSync(join(dir, migration, 'migration.sql'), sql)
  }
  return dir
}

/** Tables, columns and their types: what a schema change would change. */
async function schemaOf(db: PGlite): Promise<unknown[]> {
  const { rows } = await db.query(
    `SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns
     WHERE table_schema = 'public' ORDER BY table_name, column_name`,
  )
  return rows
}

beforeAll(async () => {
  initSql = await diffSchema({ to: { schema: SCHEMA } })
})

describe('diffSchema', () => {
  it('generates the SQL that creates a schema from nothing', () => {
    expect(initSql).toContain('CREATE TYPE "Role" AS ENUM')
    expect(initSql).toContain('CREATE TABLE "User"')
    expect(initSql).toContain('CREATE UNIQUE INDEX "User_email_key"')
    expect(initSql).toContain('FOREIGN KEY ("authorId") REFERENCES "User"("id")')
  })

  it('compares a live database with a schema', async () => {
    const db = await PGlite.create()
    try {
      await db.exec(initSql)
      expect(await diffSchema({ from: { db }, to: { schema: SCHEMA } })).toBe('')
      await db.exec('ALTER TABLE "User" DROP COLUMN "score"')
      expect(await diffSchema({ from: { db }, to: { schema: SCHEMA } })).toContain('ADD COLUMN     "score" DOUBLE PRECISION')
    } finally {
      await db.close()
    }
  })

  it('compares a migrations folder with a schema, replaying it on a scratch database', async () => {
    const dir = migrationsFolder('diff', { '20240101000000_init': initSql })
    expect(await diffSchema({ from: { migrationsDir: dir }, to: { schema: SCHEMA } })).toBe('')
    const extended = SCHEMA.replace('model Post {', 'model Tag {\n  id Int @id\n}\n\nmodel Post {')
    expect(await diffSchema({ from: { migrationsDir: dir }, to: { schema: extended } })).toContain('CREATE TABLE "Tag"')
  })

  it('diffs from a migrations folder written by hand, with no migration_lock.toml', async () => {
    const dir = join(work, 'no-lock')
    mkdirSync(join(dir, '20240101000000_init'), { recursive: true })
    writeFileSync(join(dir, '20240101000000_init', 'migration.sql'), initSql)
    expect(await diffSchema({ from: { migrationsDir: dir }, to: { schema: SCHEMA } })).toBe('')
  })
})

describe('pushSchema', () => {
  it('creates the schema on a fresh database, and Prisma Client works on it', async () => {
    const db = await PGlite.create()
    try {
      const result = await pushSchema(db, { schema: SCHEMA })
      expect(result.executedSteps).toBeGreaterThan(0)
      const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })
      await prisma.user.create({ data: { email: 'pushed@x.io', roles: ['ADMIN'] } })
      expect(await prisma.user.findMany({ select: { email: true, roles: true } })).toEqual([{ email: 'pushed@x.io', roles: ['ADMIN'] }])
      await prisma.$disconnect()
    } finally {
      await db.close()
    }
  })

  it('pushing the same schema again is a no-op', async () => {
    const db = await PGlite.create()
    try {
      await pushSchema(db, { schema: SCHEMA })
      expect(await pushSchema(db, { schema: SCHEMA })).toEqual({ executedSteps: 0, warnings: [] })
    } finally {
      await db.close()
    }
  })

  it('refuses a change that loses data unless told to accept it, changing nothing', async () => {
    const db = await PGlite.create()
    try {
      await pushSchema(db, { schema: SCHEMA })
      await db.query(`INSERT INTO "User" (email, score) VALUES ('keep@x.io', 1)`)
      const before = await schemaOf(db)
      const withoutScore = SCHEMA.replace(/^\s*score .*$/m, '')
      await expect(pushSchema(db, { schema: withoutScore })).rejects.toThrow(SchemaEngineError)
      expect(await schemaOf(db)).toEqual(before)
      const accepted = await pushSchema(db, { schema: withoutScore, acceptDataLoss: true })
      expect(accepted.warnings.length).toBeGreaterThan(0)
      expect((await schemaOf(db)).some((c) => (c as { column_name: string }).column_name === 'score')).toBe(false)
    } finally {
      await db.close()
    }
  })
})

describe('applyMigrations', () => {
  it('applies a migrations folder to a fresh database and records it as migrate deploy does', async () => {
    const dir = migrationsFolder('fresh', {
      '20240101000000_init': initSql,
      '20240102000000_seed': `INSERT INTO "User" (email) VALUES ('seeded@x.io');`,
    })
    const db = await PGlite.create()
    try {
      expect(await applyMigrations(db, { migrationsDir: dir })).toEqual({ appliedMigrationNames: ['20240101000000_init', '20240102000000_seed'] })
      const { rows } = await db.query<{ migration_name: string; checksum: string; applied_steps_count: number; finished: boolean }>(
        'SELECT migration_name, checksum, applied_steps_count, finished_at IS NOT NULL AS finished FROM _prisma_migrations ORDER BY migration_name',
      )
      const { createHash } = await import('node:crypto')
      expect(rows).toEqual([
        { migration_name: '20240101000000_init', checksum: createHash('sha256').update(initSql).digest('hex'), applied_steps_count: 1, finished: true },
        {
          migration_name: '20240102000000_seed',
          checksum: createHash('sha256').update(readFileSync(join(dir, '20240102000000_seed', 'migration.sql'))).digest('hex'),
          applied_steps_count: 1,
          finished: true,
        },
      ])
      const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })
      expect(await prisma.user.findMany({ select: { email: true } })).toEqual([{ email: 'seeded@x.io' }])
      await prisma.$disconnect()
    } finally {
      await db.close()
    }
  })

  it('applying again is a no-op', async () => {
    const dir = migrationsFolder('again', { '20240101000000_init': initSql })
    const db = await PGlite.create()
    try {
      await applyMigrations(db, { migrationsDir: dir })
      expect(await applyMigrations(db, { migrationsDir: dir })).toEqual({ appliedMigrationNames: [] })
      expect((await db.query('SELECT count(*)::int AS n FROM _prisma_migrations')).rows).toEqual([{ n: 1 }])
    } finally {
      await db.close()
    }
  })

  it('fails a broken migration clearly, naming it and its failing statement, and leaves the database as before', async () => {
    const dir = migrationsFolder('broken', { '20240101000000_init': initSql })
    const db = await PGlite.create()
    try {
      await applyMigrations(db, { migrationsDir: dir })
      await db.query(`INSERT INTO "User" (email) VALUES ('before@x.io')`)
      const before = { schema: await schemaOf(db), history: (await db.query('SELECT * FROM _prisma_migrations')).rows, users: (await db.query('SELECT * FROM "User"')).rows }
      migrationsFolder('broken', {
        '20240102000000_broken': [
          'CREATE TABLE "Half" (id int);',
          `INSERT INTO "User" (email) VALUES ('during@x.io');`,
          'ALTER TABLE "Missing" ADD COLUMN x int;',
          'CREATE TABLE "Never" (id int);',
        ].join('\n'),
      })
      const error = await applyMigrations(db, { migrationsDir: dir }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(MigrationError)
      const failure = error as MigrationError
      expect(failure.migrationName).toBe('20240102000000_broken')
      expect(failure.statement).toBe('ALTER TABLE "Missing" ADD COLUMN x int')
      expect(failure.databaseError?.code).toBe('42P01')
      expect(failure.message).toContain('20240102000000_broken')
      expect(failure.message).toContain('ALTER TABLE "Missing" ADD COLUMN x int')
      expect(await schemaOf(db)).toEqual(before.schema)
      expect((await db.query('SELECT * FROM _prisma_migrations')).rows).toEqual(before.history)
      expect((await db.query('SELECT * FROM "User"')).rows).toEqual(before.users)
    } finally {
      await db.close()
    }
  })

  it('names the failing statement of a migration whose error has no position', async () => {
    const dir = migrationsFolder('no-position', {
      '20240101000000_dupes': 'CREATE TABLE "D" (id int);\nINSERT INTO "D" VALUES (1), (1);\nALTER TABLE "D" ADD PRIMARY KEY (id);\n',
    })
    const db = await PGlite.create()
    try {
      const error = (await applyMigrations(db, { migrationsDir: dir }).catch((e: unknown) => e)) as MigrationError
      expect(error).toBeInstanceOf(MigrationError)
      expect(error.databaseError?.code).toBe('23505')
      expect(error.statement).toBe('ALTER TABLE "D" ADD PRIMARY KEY (id)')
      expect((await db.query(`SELECT to_regclass('"D"')::text AS d`)).rows).toEqual([{ d: null }])
    } finally {
      await db.close()
    }
  })

  it('keeps the migrations before a broken one applied', async () => {
    const dir = migrationsFolder('partial', {
      '20240101000000_init': initSql,
      '20240102000000_broken': 'SELECT 1/0;',
    })
    const db = await PGlite.create()
    try {
      await expect(applyMigrations(db, { migrationsDir: dir })).rejects.toThrow(MigrationError)
      expect((await db.query('SELECT migration_name FROM _prisma_migrations')).rows).toEqual([{ migration_name: '20240101000000_init' }])
    } finally {
      await db.close()
    }
  })
})

describe('the schema engine on this Node', () => {
  it('loads without --experimental-wasm-modules and lets the process exit when done', () => {
    // Inside the package, so that its dependencies resolve.
    const scratch = fileURLToPath(new URL('../.tmp/', import.meta.url))
    mkdirSync(scratch, { recursive: true })
    const script = join(scratch, `exit-check-${process.pid}.mjs`)
    const entry = fileURLToPath(new URL('../src/index.ts', import.meta.url))
    writeFileSync(
      script,
      `import { PGlite } from '@pgwasm/pglite'\nimport { pushSchema } from ${JSON.stringify(entry)}\n` +
        `const db = await PGlite.create()\nconst r = await pushSchema(db, { schema: ${JSON.stringify(SCHEMA)} })\n` +
        `await db.close()\nconsole.log('pushed', r.executedSteps)\n` +
        // Ref'd timers are what would keep the process from exiting; unref'd ones are not listed.
        `console.log('timers', process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length)\n`,
    )
    const run = spawnSync(process.execPath, ['--import', 'tsx', script], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      encoding: 'utf8',
      timeout: 60_000,
    })
    rmSync(script, { force: true })
    expect(run.stderr).not.toContain('experimental')
    expect(run.stdout).toContain('pushed')
    expect(run.status).toBe(0)
    // The engine arms minute-long timers; unref'd, none is left holding the process.
    expect(run.stdout).toContain('timers 0')
  })
})
