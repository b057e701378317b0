import type { PgClient, PgliteImpl, PgliteLike } from '../anchors.js'
import { errorText, type SuiteRun } from '../harness.js'
import { extendedQuery, ReplyScanner } from '../protocol.js'

/**
 * Runaway statements that never call out of the engine, each stopped by
 * `statement_timeout`: the row is the time from the timeout to the
 * rejection (57014), on each pgwasm path of the suite. pgwasm's engine
 * polls the host every 512 interrupt checks (docs/engine.md, "Interrupt
 * polls"); native PostgreSQL's SIGALRM is the anchor. PGlite runs each of
 * them to its end (or forever), so its rows are skipped.
 */
export const RUNAWAYS: Readonly<Record<string, string>> = {
  'a 3-way cross join': 'select count(*) from stop_t a, stop_t b, stop_t c',
  'an endless PL/pgSQL loop': 'do $$ begin loop end loop; end $$',
  'a recursive CTE': 'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r where n < 0',
  'a catastrophic regex': `select repeat('a', 999) ~ '^(a*)(a*)(a*)\\1\\2\\3\\1\\2\\3\\1x?$'`,
}

export const STOP_CASES = Object.keys(RUNAWAYS).map((name) => `stop at statement_timeout: ${name}`)

const TIMEOUT_MS = 100
const SAMPLES = 5

/** One way of sending a statement: resolves with the error message it failed with, or undefined. */
export type Send = (sql: string) => Promise<string | undefined>

const CANCELED = 'canceling statement due to statement timeout'

/** Milliseconds from the timeout to the 57014 rejection, `SAMPLES` times per case. */
export async function latencies(exec: (sql: string) => Promise<unknown>, send: Send): Promise<number[][]> {
  await exec('drop table if exists stop_t; create table stop_t as select g from generate_series(1, 1000) g')
  // PL/pgSQL loads its module on first use: outside the timed samples.
  await exec('do $$ begin end $$')
  await exec(`set statement_timeout = '${TIMEOUT_MS}ms'`)
  const all: number[][] = []
  try {
    for (const sql of Object.values(RUNAWAYS)) {
      const samples: number[] = []
      for (let i = 0; i < SAMPLES; i++) {
        const started = performance.now()
        const failed = await send(sql)
        if (failed !== CANCELED) throw new Error(`expected "${CANCELED}", got ${failed ?? 'no error'}`)
        samples.push(Math.max(0.001, performance.now() - started - TIMEOUT_MS))
      }
      all.push(samples)
    }
  } finally {
    await exec('reset statement_timeout; drop table stop_t')
  }
  return all
}

export const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** The pgwasm paths of the rtt suite, each sending the statement its own way. */
function oursPaths(db: PgliteLike): Record<string, Send> {
  const scanner = new ReplyScanner()
  return {
    'pgwasm query()': (sql) => db.query(sql).then(() => undefined, messageOf),
    'pgwasm exec()': (sql) => db.exec(sql).then(() => undefined, messageOf),
    'pgwasm raw stream': async (sql) => {
      scanner.reset()
      await db.execProtocolRawStream(extendedQuery(sql), { onRawData: scanner.feed })
      return scanner.firstError
    },
  }
}

/** The stop rows of the rtt suite: `paths` is every path the suite reports. */
export async function addStopRows(s: SuiteRun, ours: PgliteImpl | undefined, native: PgClient | undefined, paths: readonly string[]): Promise<void> {
  const cases = STOP_CASES.filter((c) => s.wants(c))
  if (cases.length === 0) return
  const measured = new Map<string, number[][] | Error>()
  const measure = async (path: string, exec: (sql: string) => Promise<unknown>, send: Send): Promise<void> => {
    measured.set(path, await latencies(exec, send).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))))
  }
  if (ours) {
    const db = await ours.create()
    try {
      for (const [path, send] of Object.entries(oursPaths(db))) await measure(path, (sql) => db.exec(sql), send)
    } finally {
      await db.close()
    }
  }
  if (native) await measure('native pg', (sql) => native.query(sql), (sql) => native.query(sql).then(() => undefined, messageOf))
  for (const [i, name] of STOP_CASES.entries()) {
    if (!cases.includes(name)) continue
    for (const path of paths) {
      const side = path.startsWith('pgwasm') ? ('ours' as const) : ('anchor' as const)
      const base = { case: name, path, side, unit: 'ms' as const, ...(path === 'native pg' ? { vs: 'pgwasm query()' } : {}) }
      const got = measured.get(path)
      if (got instanceof Error) s.mark({ ...base, status: 'failed', reason: errorText(got) })
      else if (got) s.add({ ...base, samples: got[i]! })
      else if (path.startsWith('PGlite')) s.mark({ ...base, status: 'skipped', reason: 'PGlite cannot stop a statement that never calls out of its engine: it runs to its end' })
      else if (path === 'better-sqlite3') s.mark({ ...base, status: 'skipped', reason: 'SQLite has no statement timeout' })
      else s.mark({ ...base, status: 'skipped', reason: 'not available in this run' })
    }
  }
}
