import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { SCHEMA } from './helpers.js'

// tsx's loader by URL: the commands run in project folders that cannot resolve it.
const tsx = import.meta.resolve('tsx')
const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url))
const work = tempDir('pglite-prisma-cli-')

interface Run {
  code: number
  stdout: string
  stderr: string
}

/** Runs `pgwasm-prisma` (its source, through tsx) in `cwd`. */
function pgwasmPrisma(cwd: string, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', tsx, cli, ...args],
      { cwd, timeout: 120_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    )
  })
}

/** A project folder with `prisma/schema.prisma`. */
function project(name: string, schema: string): string {
  const dir = join(work, name)
  mkdirSync(join(dir, 'prisma'), { recursive: true })
  writeFileSync(join(dir, 'prisma', 'schema.prisma'), schema)
  return dir
}

const WITHOUT_POST = SCHEMA.replace(/^\s*posts .*$/m, '').replace(/model Post \{[\s\S]*?\n\}\n/, '')

describe('pgwasm-prisma migrate', () => {
  it('dev creates a migration per change; status reports a fresh data directory behind and deploy brings it up to date', async () => {
    // A model first, then a column.
    const dir = project('flow', WITHOUT_POST.replace(/^\s*score .*$/m, ''))
    const first = await pgwasmPrisma(dir, 'migrate', 'dev', '--name', 'init', '--db', 'data')
    expect({ code: first.code, stderr: first.stderr }).toEqual({ code: 0, stderr: '' })
    expect(first.stdout).toMatch(/prisma\/migrations\/\d{14}_init\/migration\.sql/)
    writeFileSync(join(dir, 'prisma', 'schema.prisma'), WITHOUT_POST)
    const second = await pgwasmPrisma(dir, 'migrate', 'dev', '-n', 'add score', '--db', 'data')
    expect({ code: second.code, stderr: second.stderr }).toEqual({ code: 0, stderr: '' })
    expect(second.stdout).toMatch(/prisma\/migrations\/\d{14}_add_score\/migration\.sql/)
    const migrations = readdirSync(join(dir, 'prisma', 'migrations')).sort()
    expect(migrations).toEqual([expect.stringMatching(/_init$/), expect.stringMatching(/_add_score$/), 'migration_lock.toml'])

    const behind = await pgwasmPrisma(dir, 'migrate', 'status', '--db', 'fresh')
    expect({ code: behind.code, stderr: behind.stderr }).toEqual({ code: 1, stderr: '' })
    expect(behind.stdout).toContain('2 migrations found in prisma/migrations')
    expect(behind.stdout).toContain(`have not yet been applied:\n  ${migrations[0]}\n  ${migrations[1]}`)

    const deploy = await pgwasmPrisma(dir, 'migrate', 'deploy', '--db', 'fresh')
    expect({ code: deploy.code, stderr: deploy.stderr }).toEqual({ code: 0, stderr: '' })
    expect(deploy.stdout).toContain(`have been applied:\n  ${migrations[0]}\n  ${migrations[1]}`)

    // What deploy committed is on disk, recorded as Prisma records it.
    const db = await PGlite.create(join(dir, 'fresh'))
    try {
      const { rows } = await db.query<{ migration_name: string }>('SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL ORDER BY migration_name')
      expect(rows.map((r) => r.migration_name)).toEqual(migrations.slice(0, 2))
      expect((await db.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'User' AND column_name = 'score'`)).rows).toHaveLength(1)
    } finally {
      await db.close()
    }
  })

  it('fails clearly on a missing schema, a missing --db or an unconfirmed reset, before opening anything', async () => {
    const dir = join(work, 'empty')
    mkdirSync(dir, { recursive: true })
    const noSchema = await pgwasmPrisma(dir, 'migrate', 'dev', '--name', 'init', '--db', 'data')
    expect(noSchema.code).toBe(2)
    expect(noSchema.stderr).toContain('cannot read the Prisma schema at prisma/schema.prisma (ENOENT)')
    const noDb = await pgwasmPrisma(dir, 'migrate', 'deploy')
    expect(noDb.code).toBe(2)
    expect(noDb.stderr).toContain('`--db <dir>` is required')
    const reset = await pgwasmPrisma(dir, 'migrate', 'reset', '--db', 'data')
    expect(reset.code).toBe(2)
    expect(reset.stderr).toContain('pass `--force`')
    const unknown = await pgwasmPrisma(dir, 'migrate', 'up', '--db', 'data')
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('unknown command `migrate up`')
    expect(existsSync(join(dir, 'data'))).toBe(false)
  })

  it('asks for --name when the schema has changes, writing no migration', async () => {
    const dir = project('unnamed', SCHEMA)
    const run = await pgwasmPrisma(dir, 'migrate', 'dev', '--db', 'data')
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('name the new migration')
    expect(existsSync(join(dir, 'prisma', 'migrations'))).toBe(false)
  })
})
