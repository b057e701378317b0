import {
  connectNative,
  loadOurs,
  loadPglite,
  loadSqlite,
  type PgClient,
  type PgliteImpl,
  type PgliteLike,
  type SqliteDatabase,
} from '../anchors.js'
import { errorText, timeInterleaved, totalCalls, type SuiteRun, type TimedPath } from '../harness.js'
import { bindDescribeExecuteSync, parseNamed, ReplyScanner } from '../protocol.js'
import { randomLetters, rng } from '../rng.js'
import { addStopRows, STOP_CASES } from './stop-latency.js'

/**
 * PGlite's published RTT families: one statement per call, timed from call
 * to resolved promise, through every path that can run it.
 */

interface Op {
  case: string
  /** The table a family's cases work on; its insert case fills it. */
  family: string | null
  kind: 'insert' | 'run' | 'get' | 'all'
  sql: string
  params: (i: number) => unknown[]
}

interface Family {
  name: string
  table: 't1' | 't2'
  value: (i: number) => number | string
}

export const SELECT_BY_PK = 't1: select by id'
export const SELECT_100 = 'select 100 rows x 5 cols'

const PG_DDL = [
  'create table t1 (id serial primary key, a int)',
  'create table t2 (id serial primary key, a text)',
  'create table t100 (id int primary key, a int, b int, c text, d text)',
]
const SQLITE_DDL = [
  'create table t1 (id integer primary key, a int)',
  'create table t2 (id integer primary key, a text)',
  'create table t100 (id int primary key, a int, b int, c text, d text)',
]
const T100_INSERT = 'insert into t100 (id, a, b, c, d) values ($1, $2, $3, $4, $5)'

function textPool(length: number, seed: number): string[] {
  const next = rng(seed)
  return Array.from({ length: 8 }, () => randomLetters(next, length))
}

function buildOps(calls: number): { ops: Op[]; families: Family[] } {
  const k1 = textPool(1000, 1)
  const k10 = textPool(10_000, 2)
  const families: Family[] = [
    { name: 't1', table: 't1', value: (i) => (i * 7919) % 1_000_000 },
    { name: 't2 1,000 chars', table: 't2', value: (i) => k1[i % k1.length]! },
    { name: 't2 10,000 chars', table: 't2', value: (i) => k10[(i + 3) % k10.length]! },
  ]
  const ops: Op[] = []
  for (const f of families) {
    // Ids 1..calls exist after the insert case (every path runs each case `calls` times).
    const id = (i: number) => (i % calls) + 1
    ops.push(
      { case: `${f.name}: insert`, family: f.name, kind: 'insert', sql: `insert into ${f.table} (a) values ($1)`, params: (i) => [f.value(i)] },
      { case: `${f.name}: select by id`, family: f.name, kind: 'get', sql: `select * from ${f.table} where id = $1`, params: (i) => [id(i)] },
      {
        case: `${f.name}: update by id`,
        family: f.name,
        kind: 'run',
        sql: `update ${f.table} set a = $1 where id = $2`,
        params: (i) => [f.value(i + 1), id(i)],
      },
      { case: `${f.name}: delete one`, family: f.name, kind: 'run', sql: `delete from ${f.table} where id = $1`, params: (i) => [i + 1] },
    )
  }
  ops.push(
    { case: 'select 1', family: null, kind: 'get', sql: 'select 1', params: () => [] },
    { case: SELECT_100, family: null, kind: 'all', sql: 'select id, a, b, c, d from t100', params: () => [] },
  )
  return { ops, families }
}

/** Every case and path the suite reports (the test checks all of them are present). */
export const RTT_CASES = [...buildOps(1).ops.map((o) => o.case), ...STOP_CASES]
export const RTT_PATHS = [
  'pgwasm query()',
  'pgwasm exec()',
  'pgwasm raw stream',
  'PGlite query()',
  'PGlite exec()',
  'PGlite raw stream',
  'better-sqlite3',
  'native pg',
]

function t100Row(i: number): unknown[] {
  return [i, i * 3, i * 7, `text value ${i}`, `another text ${i * 11}`]
}

function literal(v: unknown): string {
  return typeof v === 'number' ? String(v) : `'${String(v).replace(/'/g, "''")}'`
}

/** The statement with its parameters written in, as an application using exec() would send it. */
function inline(sql: string, params: readonly unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_m, n: string) => literal(params[Number(n) - 1]))
}

interface Driver {
  path: string
  side: 'ours' | 'anchor'
  vs?: string
  /** Makes the timed function for an op (preparing untimed where the path prepares); it counts its own calls. */
  task(op: Op): Promise<() => Promise<unknown>>
  /** Untimed statement (setup, resets). */
  plain(sql: string, params?: unknown[]): Promise<void>
  dialect: 'pg' | 'sqlite'
  close(): Promise<void>
}

function counting(run: (i: number) => Promise<unknown>): () => Promise<unknown> {
  let i = 0
  return () => run(i++)
}

function pgliteDrivers(impl: PgliteImpl, db: Record<'query' | 'exec' | 'raw', PgliteLike>): Driver[] {
  const anchor = impl.side === 'anchor'
  const scanner = new ReplyScanner()
  const rawCall = async (message: Uint8Array) => {
    scanner.reset()
    await db.raw.execProtocolRawStream(message, { onRawData: scanner.feed })
    if (scanner.errors > 0) throw new Error(`raw stream: ${scanner.firstError}`)
    if (scanner.readyCount !== 1) throw new Error(`raw stream: ${scanner.readyCount} ReadyForQuery`)
  }
  let statements = 0
  const base = (d: PgliteLike) => ({
    side: impl.side,
    dialect: 'pg' as const,
    plain: async (sql: string, params?: unknown[]) => {
      await d.query(sql, params ?? [])
    },
    close: () => d.close(),
  })
  return [
    {
      ...base(db.query),
      path: `${impl.label} query()`,
      ...(anchor ? { vs: 'pgwasm query()' } : {}),
      task: async (op) => counting((i) => db.query.query(op.sql, op.params(i))),
    },
    {
      ...base(db.exec),
      path: `${impl.label} exec()`,
      ...(anchor ? { vs: 'pgwasm exec()' } : {}),
      task: async (op) => counting((i) => db.exec.exec(inline(op.sql, op.params(i)))),
    },
    {
      ...base(db.raw),
      path: `${impl.label} raw stream`,
      ...(anchor ? { vs: 'pgwasm raw stream' } : {}),
      // Prepared once (untimed), then Bind/Describe/Execute/Sync per call: what a
      // driver with prepared statements sends, and what query()'s statement cache does.
      task: async (op) => {
        const name = `rtt_${statements++}`
        await rawCall(parseNamed(name, op.sql))
        return counting((i) => rawCall(bindDescribeExecuteSync(op.params(i), name)))
      },
    },
  ]
}

function sqliteDriver(db: SqliteDatabase): Driver {
  // Parameters appear in order in every statement here, so anonymous ? fits.
  const toSqlite = (sql: string) => sql.replace(/\$\d+/g, '?')
  return {
    path: 'better-sqlite3',
    side: 'anchor',
    vs: 'pgwasm query()',
    dialect: 'sqlite',
    task: async (op) => {
      const st = db.prepare(toSqlite(op.sql))
      // Same async task shape as the other paths, so tinybench times them alike.
      if (op.kind === 'get') return counting(async (i) => st.get(...op.params(i)))
      if (op.kind === 'all') return counting(async (i) => st.all(...op.params(i)))
      return counting(async (i) => st.run(...op.params(i)))
    },
    plain: async (sql, params) => {
      db.prepare(toSqlite(sql)).run(...(params ?? []))
    },
    close: async () => {
      db.close()
    },
  }
}

function nativeDriver(client: PgClient, schema: string): Driver {
  let n = 0
  return {
    path: 'native pg',
    side: 'anchor',
    vs: 'pgwasm query()',
    dialect: 'pg',
    task: async (op) => {
      // Named statements: pg prepares once per connection, like better-sqlite3's prepare().
      const name = `rtt_${n++}`
      return counting((i) => client.query({ name, text: op.sql, values: op.params(i) }))
    },
    plain: async (sql, params) => {
      await client.query(sql, params ?? [])
    },
    close: async () => {
      await client.query(`drop schema if exists ${schema} cascade`).catch(() => {})
      await client.end()
    },
  }
}

async function resetFamily(d: Driver, table: string): Promise<void> {
  await d.plain(d.dialect === 'pg' ? `truncate ${table} restart identity` : `delete from ${table}`)
}

export async function run(s: SuiteRun): Promise<void> {
  const cfg = s.config
  const iterations = cfg.iterations ?? Math.max(10, Math.round(1000 * cfg.scale))
  const warmup = cfg.warmup ?? Math.max(2, Math.round(100 * cfg.scale))
  const rounds = 5
  const opts = { iterations, warmup, rounds }
  const calls = totalCalls(opts)
  Object.assign(s.settings, { iterations, warmup, rounds, callsPerPathPerCase: calls, trimmed: 'mean without top and bottom 10%' })
  s.notes.push(
    'Each path has its own database instance; per case the paths run in 5 rounds in rotating order.',
    'raw stream: execProtocolRawStream with a statement parsed once (untimed), then Bind/Describe/Execute/Sync bytes per call; the reply is only scanned for errors.',
    'better-sqlite3 and native pg use prepared statements (pg: named statements); both are compared with pgwasm query().',
  )
  const { ops, families } = buildOps(calls)
  const wanted = ops.filter((o) => s.wants(o.case))
  if (wanted.length === 0 && !STOP_CASES.some((c) => s.wants(c))) return

  const drivers: Driver[] = []
  const skipped: { path: string; side: 'ours' | 'anchor'; vs?: string; reason: string }[] = []

  const impls = [await loadOurs(), await loadPglite()]
  for (const [k, loaded] of impls.entries()) {
    const label = k === 0 ? 'pgwasm' : 'PGlite'
    const paths = ['query()', 'exec()', 'raw stream'].map((p) => `${label} ${p}`)
    if (!loaded.ok) {
      for (const p of paths) skipped.push({ path: p, side: k === 0 ? 'ours' : 'anchor', reason: loaded.reason })
      continue
    }
    try {
      const [q, e, r] = [await loaded.value.create(), await loaded.value.create(), await loaded.value.create()]
      drivers.push(...pgliteDrivers(loaded.value, { query: q!, exec: e!, raw: r! }))
    } catch (err) {
      for (const p of paths) skipped.push({ path: p, side: k === 0 ? 'ours' : 'anchor', reason: `create() failed: ${errorText(err)}` })
    }
  }
  const sqlite = await loadSqlite()
  if (sqlite.ok) drivers.push(sqliteDriver(new sqlite.value(':memory:')))
  else skipped.push({ path: 'better-sqlite3', side: 'anchor', vs: 'pgwasm query()', reason: sqlite.reason })
  const native = await connectNative(cfg.nativeUrl, cfg.nativeReason)
  if (native.ok) {
    const schema = 'pgwasm_bench_rtt'
    await native.value.query(`drop schema if exists ${schema} cascade; create schema ${schema}; set search_path to ${schema}`)
    drivers.push(nativeDriver(native.value, schema))
  } else skipped.push({ path: 'native pg', side: 'anchor', vs: 'pgwasm query()', reason: native.reason })

  for (const d of drivers) {
    for (const ddl of d.dialect === 'pg' ? PG_DDL : SQLITE_DDL) await d.plain(ddl)
    const insert = T100_INSERT
    for (let i = 1; i <= 100; i++) await d.plain(insert, t100Row(i))
  }

  const failed = new Map<string, string>()
  let currentFamily: string | null = null
  for (const op of wanted) {
    if (op.family !== currentFamily) {
      currentFamily = op.family
      const fam = families.find((f) => f.name === op.family)
      if (fam) {
        for (const d of drivers) await resetFamily(d, fam.table)
        // A filtered run may skip the insert case: the other cases still need `calls` rows.
        if (!wanted.some((o) => o.family === fam.name && o.kind === 'insert')) {
          for (const d of drivers) for (let i = 0; i < calls; i++) await d.plain(`insert into ${fam.table} (a) values ($1)`, [fam.value(i)])
        }
      }
    }
    const live = drivers.filter((d) => !failed.has(d.path))
    const paths: TimedPath[] = []
    const prepFailed = new Map<string, Error>()
    for (const d of live) {
      try {
        paths.push({ path: d.path, fn: await d.task(op) })
      } catch (err) {
        prepFailed.set(d.path, err instanceof Error ? err : new Error(String(err)))
      }
    }
    const results = await timeInterleaved(paths, opts)
    for (const [path, err] of prepFailed) results.set(path, err)
    for (const d of drivers) {
      const base = { case: op.case, path: d.path, side: d.side, unit: 'ms' as const, ...(d.vs ? { vs: d.vs } : {}) }
      const res = results.get(d.path)
      if (failed.has(d.path)) s.mark({ ...base, status: 'failed', reason: failed.get(d.path)! })
      else if (res instanceof Error) {
        failed.set(d.path, `an earlier case failed: ${errorText(res)}`)
        s.mark({ ...base, status: 'failed', reason: errorText(res) })
      } else s.add({ ...base, samples: res ?? [] })
    }
    for (const k of skipped) {
      s.mark({ case: op.case, path: k.path, side: k.side, unit: 'ms', status: 'skipped', reason: k.reason, ...(k.vs ? { vs: k.vs } : {}) })
    }
  }
  // Before the drivers close: the native one ends its client.
  await addStopRows(s, impls[0]!.ok ? impls[0]!.value : undefined, native.ok ? native.value : undefined, RTT_PATHS)
  for (const d of drivers) await d.close().catch(() => {})

  s.ratio('query/raw: 100-row select, pgwasm query() / pgwasm raw stream', { case: SELECT_100, path: 'pgwasm query()' }, { case: SELECT_100, path: 'pgwasm raw stream' })
  s.ratio('select by pk: pgwasm query() / PGlite query()', { case: SELECT_BY_PK, path: 'pgwasm query()' }, { case: SELECT_BY_PK, path: 'PGlite query()' })
  s.ratio('select by pk: pgwasm query() / native pg', { case: SELECT_BY_PK, path: 'pgwasm query()' }, { case: SELECT_BY_PK, path: 'native pg' })
}
