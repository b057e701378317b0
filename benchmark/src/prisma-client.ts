import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { BENCH_DIR, CACHE_DIR } from './paths.js'

/**
 * The Prisma schema every path of the prisma suite runs, its client
 * (generated offline into `.prisma-client/`, gitignored) and the plain SQL
 * that gives the anchors the same table.
 */

/** Where the generated client lives; regenerated only when the schema or the Prisma version changes. */
export const PRISMA_CLIENT_DIR = join(BENCH_DIR, '.prisma-client')

export const ITEM_SCHEMA = `generator client {
  provider = "prisma-client"
  output   = "./client"
}

datasource db {
  provider = "postgresql"
}

model Item {
  id        Int      @id @default(autoincrement())
  name      String
  qty       Int
  active    Boolean  @default(true)
  createdAt DateTime @default(now()) @map("created_at")

  @@map("items")
}
`

/** The table `prisma db push` makes of ITEM_SCHEMA, for the anchors that cannot push a schema. */
export const ITEM_DDL = `create table items (
  id serial primary key,
  name text not null,
  qty integer not null,
  active boolean not null default true,
  created_at timestamp(3) not null default current_timestamp
)`

export const ITEM_ROWS = 200

/** The same rows on every path: fixed names and timestamps, no randomness. */
export const ITEM_SEED = `insert into items (name, qty, active, created_at)
  select 'item ' || g || ' ' || repeat('x', 32), (g * 7919) % 1000, g % 3 <> 0, timestamp '2024-01-01' + g * interval '1 minute'
  from generate_series(1, ${ITEM_ROWS}) g`

export interface Item {
  id: number
  name: string
  qty: number
  active: boolean
  createdAt: Date
}

/** The part of the generated `prisma.item` delegate the suite calls. */
export interface ItemDelegate {
  findMany(args: { take: number }): Promise<Item[]>
  findUnique(args: { where: { id: number } }): Promise<Item | null>
  create(args: { data: { name: string; qty: number } }): Promise<Item>
  update(args: { where: { id: number }; data: { qty: number } }): Promise<Item>
}

/** The part of the generated `PrismaClient` the suite calls (declared here so typechecking needs no generated code). */
export interface BenchPrisma {
  item: ItemDelegate
  $transaction<T>(fn: (tx: { item: ItemDelegate }) => Promise<T>): Promise<T>
  $connect(): Promise<void>
  $disconnect(): Promise<void>
}

export type BenchPrismaCtor = new (options: { adapter: object }) => BenchPrisma

/**
 * Runs `prisma generate` offline unless `.prisma-client/` already holds the
 * client of this schema and Prisma version. Generates into a scratch folder
 * and renames it, so a run killed halfway leaves no half client behind.
 * @throws when `prisma generate` fails (its output is in the message).
 */
export async function ensurePrismaClient(): Promise<'cached' | 'generated'> {
  const require = createRequire(join(BENCH_DIR, 'package.json'))
  const prismaDir = dirname(require.resolve('prisma/package.json'))
  const stamp = createHash('sha256').update(ITEM_SCHEMA).update(readFileSync(join(prismaDir, 'package.json'))).digest('hex')
  const stampFile = join(PRISMA_CLIENT_DIR, '.stamp')
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return 'cached'

  const { offlineGenerateEnv } = await import('@pgwasm/pglite-prisma')
  const scratch = `${PRISMA_CLIENT_DIR}.tmp-${process.pid}`
  rmSync(scratch, { recursive: true, force: true })
  mkdirSync(scratch, { recursive: true })
  writeFileSync(join(scratch, 'schema.prisma'), ITEM_SCHEMA)
  mkdirSync(CACHE_DIR, { recursive: true })
  const run = spawnSync(process.execPath, [join(prismaDir, 'build', 'index.js'), 'generate', '--schema', join(scratch, 'schema.prisma')], {
    cwd: BENCH_DIR,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, ...offlineGenerateEnv(join(CACHE_DIR, 'no-schema-engine')) },
  })
  if (run.status !== 0) {
    rmSync(scratch, { recursive: true, force: true })
    throw new Error(`prisma generate failed (${run.error?.message ?? `exit ${run.status}`}): ${`${run.stdout}\n${run.stderr}`.trim().slice(0, 500)}`)
  }
  writeFileSync(join(scratch, '.stamp'), stamp)
  rmSync(PRISMA_CLIENT_DIR, { recursive: true, force: true })
  renameSync(scratch, PRISMA_CLIENT_DIR)
  return 'generated'
}

/** Imports the generated client (TypeScript: the process needs the tsx loader). */
export async function loadPrismaClient(): Promise<BenchPrismaCtor> {
  const mod = (await import(pathToFileURL(join(PRISMA_CLIENT_DIR, 'client', 'client.ts')).href)) as { PrismaClient: BenchPrismaCtor }
  return mod.PrismaClient
}
