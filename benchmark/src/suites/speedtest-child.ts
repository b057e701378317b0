/**
 * One speedtest run on one engine in a fresh process; prints one JSON line:
 * { times: ms per workload } or { error }.
 *   speedtest-child <target> <scale> <warm-up runs> <scratch dir> [native url]
 */
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { generateSpeedtest, sizes } from '../speedtest-sql.js'

export const TARGETS = [
  { key: 'ours-memory', path: 'pgwasm memory', side: 'ours' },
  { key: 'ours-disk', path: 'pgwasm disk', side: 'ours' },
  { key: 'pglite-memory', path: 'PGlite memory', side: 'anchor', vs: 'pgwasm memory' },
  { key: 'pglite-disk', path: 'PGlite disk', side: 'anchor', vs: 'pgwasm disk' },
  { key: 'sqlite-memory', path: 'better-sqlite3 memory', side: 'anchor', vs: 'pgwasm memory' },
  { key: 'sqlite-disk', path: 'better-sqlite3 disk', side: 'anchor', vs: 'pgwasm disk' },
  { key: 'native', path: 'native pg', side: 'anchor', vs: 'pgwasm memory' },
] as const
export type TargetKey = (typeof TARGETS)[number]['key']

interface Session {
  exec(sql: string): Promise<void>
  count(table: string): Promise<number>
  close(): Promise<void>
}

interface PgliteDb {
  exec(sql: string): Promise<unknown>
  query(sql: string): Promise<{ rows: unknown[] }>
  close(): Promise<void>
}

async function open(key: TargetKey, scratch: string, url: string | undefined): Promise<Session> {
  if (key.startsWith('ours') || key.startsWith('pglite')) {
    const mod = (key.startsWith('ours') ? await import('@pgwasm/pglite') : await import('@electric-sql/pglite')) as unknown as {
      PGlite: { create(dir?: string): Promise<PgliteDb> }
    }
    const dir = key.endsWith('disk') ? join(scratch, 'data') : undefined
    const db = await mod.PGlite.create(dir)
    return {
      exec: async (sql) => {
        await db.exec(sql)
      },
      count: async (t) => Number((((await db.query(`select count(*)::int as n from ${t}`)).rows[0] as { n: number }).n)),
      close: () => db.close(),
    }
  }
  if (key.startsWith('sqlite')) {
    const Database = ((await import('better-sqlite3')) as unknown as { default: new (f: string) => import('better-sqlite3').Database }).default
    const db = new Database(key === 'sqlite-disk' ? join(scratch, 'speedtest.db') : ':memory:')
    return {
      exec: async (sql) => {
        db.exec(sql)
      },
      count: async (t) => (db.prepare(`select count(*) as n from ${t}`).get() as { n: number }).n,
      close: async () => {
        db.close()
      },
    }
  }
  const pg = ((await import('pg')) as unknown as { default: typeof import('pg') }).default
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  // Its own schema, so a user's server given with --native is left untouched.
  const schema = 'pgwasm_bench_speedtest'
  await client.query(`drop schema if exists ${schema} cascade; create schema ${schema}; set search_path to ${schema}`)
  return {
    exec: async (sql) => {
      await client.query(sql)
    },
    count: async (t) => Number((await client.query<{ n: number }>(`select count(*)::int as n from ${t}`)).rows[0]!.n),
    close: async () => {
      await client.query(`drop schema if exists ${schema} cascade`)
      await client.end()
    },
  }
}

async function runAll(session: Session, scale: number): Promise<number[]> {
  const times: number[] = []
  for (const [k, w] of generateSpeedtest(scale).entries()) {
    const t0 = performance.now()
    for (const batch of w.batches) await session.exec(batch)
    times.push(performance.now() - t0)
    // Untimed check that the engine really did the work.
    if (k === 14) {
      const n = await session.count('t1')
      if (n !== sizes(scale).smallInserts) throw new Error(`t1 has ${n} rows after workload 15, expected ${sizes(scale).smallInserts}`)
    }
  }
  return times
}

async function main(): Promise<number[]> {
  const [key, scaleArg, warmupArg, scratch, url] = process.argv.slice(2) as [TargetKey, string, string, string, string | undefined]
  const scale = Number(scaleArg)
  mkdirSync(scratch, { recursive: true })
  const session = await open(key, scratch, url)
  try {
    // Warm-up at a tenth of the size warms the JIT and the catalog caches; its DROP TABLE leaves the database empty again.
    for (let w = 0; w < Number(warmupArg); w++) await runAll(session, scale / 10)
    return await runAll(session, scale)
  } finally {
    await session.close()
    rmSync(scratch, { recursive: true, force: true })
  }
}

// Imported by the parent for TARGETS only; runs when executed as the bundled child.
if (process.argv[1]?.endsWith('speedtest-child.mjs')) {
  try {
    console.log(JSON.stringify({ times: await main() }))
  } catch (err) {
    console.log(JSON.stringify({ error: (err instanceof Error ? err.message : String(err)).split('\n')[0] }))
  }
  process.exit(0)
}
