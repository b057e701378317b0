import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findBuiltEngine, initCluster, runSingleUser, type BuiltEngine } from '@pgwasm/engine'
import { InProcessBackend } from '@pgwasm/engine/in-process'
import { serialize } from 'pg-protocol'
import { connectNative, loadOurs, loadPglite, type PgliteLike } from '../anchors.js'
import { errorText, timeInterleaved, type SuiteRun, type TimedPath } from '../harness.js'
import { bindDescribeExecuteSync, parseNamed, ReplyScanner } from '../protocol.js'
import { latencies, messageOf, STOP_CASES, type Send } from './stop-latency.js'

/**
 * The engines themselves, without any host around them: the same statements
 * in our engine (built from Debian's sources by `pnpm engine`, run as its
 * single-user backend under Node), in PGlite 0.5.16's published engine, and
 * in native PostgreSQL. Each sample is one statement's time measured inside
 * the engine (clock_timestamp() before and after an EXECUTE), so process
 * start-up, the wire protocol and the JavaScript host do not count: what
 * differs is the compiler, the flags and setjmp/longjmp (wasm exceptions in
 * ours, JavaScript invoke_* trampolines in the published engine).
 */

export const OURS = 'our engine (Debian sources)'
export const PGLITE = 'PGlite 0.5.16 engine'
export const NATIVE = 'native pg'
export const ENGINE_PATHS = [OURS, PGLITE, NATIVE]

/**
 * The wire case: a prepared primary-key lookup (Bind, Describe, Execute,
 * Sync) per call, in this process. Ours is the in-process engine
 * (lib/postgres.mjs) behind its minimal test host; the anchors are the
 * published engine behind pgwasm's core, which the in-process engine is to
 * replace, and behind PGlite's own host.
 */
export const WIRE_CASE = 'prepared pk lookup over the wire, in process'
export const OURS_IN_PROCESS = 'our engine in process'
export const CORE_PUBLISHED = 'pgwasm core, published engine'
export const PGLITE_HOST = 'PGlite 0.5.16'
export const WIRE_PATHS = [OURS_IN_PROCESS, CORE_PUBLISHED, PGLITE_HOST]
const WIRE_ROWS = 10_000
const WIRE_SETUP = `create table kv (id int primary key, v text); insert into kv select g, md5(g::text) from generate_series(1, ${WIRE_ROWS}) g`
const WIRE_SELECT = 'select v from kv where id = $1'

interface EngineCase {
  name: string
  sql: (scale: number) => string
}

const size = (base: number, scale: number, min: number) => Math.max(min, Math.round(base * scale))

export const ENGINE_CASES: EngineCase[] = [
  // Each iteration enters and leaves a BEGIN ... EXCEPTION block: a setjmp.
  { name: 'PL/pgSQL exception blocks', sql: (scale) => `select pg_temp.pgwasm_exception_blocks(${size(200_000, scale, 1000)})` },
  { name: 'sum over a series', sql: (scale) => `select sum(g) from generate_series(1, ${size(3_000_000, scale, 10_000)}) g` },
  {
    name: 'sort of md5 strings',
    sql: (scale) => `select count(*) from (select md5(g::text) m from generate_series(1, ${size(500_000, scale, 5000)}) g order by m) s`,
  },
]

/** The two functions every engine gets, as temporary ones (a native URL's database is left as it was). */
const SETUP = [
  'create function pg_temp.pgwasm_exception_blocks(n int) returns int language plpgsql as $$ declare s int := 0; begin for i in 1..n loop begin s := s + i % 7; exception when others then s := -1; end; end loop; return s; end $$',
  'create function pg_temp.pgwasm_statement_ms(q text) returns numeric language plpgsql as $$ declare t0 timestamptz := clock_timestamp(); begin execute q; return extract(epoch from clock_timestamp() - t0) * 1000; end $$',
]

const timed = (sql: string) => `select pg_temp.pgwasm_statement_ms('${sql.replaceAll("'", "''")}') as ms`

/** The statements in order: `warmup` discarded runs, then `runs` timed ones, case by case. */
function plan(scale: number, warmup: number, runs: number): { caseName: string; sql: string; timed: boolean }[] {
  return ENGINE_CASES.flatMap((c) =>
    Array.from({ length: warmup + runs }, (_, i) => ({ caseName: c.name, sql: timed(c.sql(scale)), timed: i >= warmup })),
  )
}

/** A new cluster of our engine in a temporary directory: its data directory, and the directory to remove afterwards. */
function newCluster(engine: BuiltEngine): { data: string; work: string } {
  const work = mkdtempSync(join(tmpdir(), 'pgwasm-bench-engine-'))
  const data = join(work, 'data')
  const init = initCluster(engine, data, ['--no-sync'])
  if (init.status !== 0) {
    rmSync(work, { recursive: true, force: true })
    throw new Error(`initdb failed: ${init.stderr.trim().split('\n').slice(-2).join(' / ')}`)
  }
  return { data, work }
}

/** Our engine: initdb, then one single-user backend runs the whole plan from its stdin. */
function runOurs(statements: ReturnType<typeof plan>): number[] {
  const engine = findBuiltEngine()
  if (!engine) throw new Error('not built')
  const { data, work } = newCluster(engine)
  try {
    const input = [...SETUP, ...statements.map((s) => s.sql)].map((sql) => `${sql};\n`).join('')
    const backend = runSingleUser(engine, data, input)
    const times = [...backend.stdout.matchAll(/ms = "([\d.]+)"/g)].map((m) => Number(m[1]))
    if (times.length !== statements.length) throw new Error(`the backend printed ${times.length} of ${statements.length} times: ${backend.stderr.trim().slice(-300)}`)
    return times
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

interface Queryable {
  query(sql: string): Promise<{ rows: unknown[] }>
}

async function runThrough(db: Queryable, statements: ReturnType<typeof plan>): Promise<number[]> {
  for (const sql of SETUP) await db.query(sql)
  const times: number[] = []
  for (const s of statements) times.push(Number((((await db.query(s.sql)).rows[0] as { ms: string | number }).ms)))
  return times
}

/** A round trip that checks its reply for errors and its ReadyForQuery. */
function checkedCall(send: (bytes: Uint8Array, scanner: ReplyScanner) => Promise<void> | void): () => Promise<void> {
  const scanner = new ReplyScanner()
  let i = 0
  return async () => {
    scanner.reset()
    await send(bindDescribeExecuteSync([(i++ % WIRE_ROWS) + 1], 'pk'), scanner)
    if (scanner.errors > 0 || scanner.readyCount !== 1) throw new Error(scanner.firstError ?? `${scanner.readyCount} ReadyForQuery`)
  }
}

/** A path's way of running setup SQL and of sending one statement (its error message back), for the stop rows. */
interface StopPath {
  exec: (sql: string) => Promise<unknown>
  send: Send
}

function inProcessStopPath(backend: InProcessBackend): StopPath {
  const run = (sql: string): string | undefined => {
    const scanner = new ReplyScanner()
    scanner.feed(backend.exec(serialize.query(sql)))
    return scanner.errors > 0 ? scanner.firstError ?? 'error' : undefined
  }
  return {
    exec: async (sql) => {
      const failed = run(sql)
      if (failed !== undefined) throw new Error(failed)
    },
    send: async (sql) => run(sql),
  }
}

async function wirePaths(
  s: SuiteRun,
  opened: Array<() => void | Promise<void>>,
): Promise<{ paths: TimedPath[]; failed: Map<string, string>; stops: Map<string, StopPath> }> {
  const paths: TimedPath[] = []
  const stops = new Map<string, StopPath>()
  const failed = new Map<string, string>()
  const engine = findBuiltEngine()
  if (!engine) failed.set(OURS_IN_PROCESS, 'not built')
  else {
    try {
      const { data, work } = newCluster(engine)
      opened.push(() => rmSync(work, { recursive: true, force: true }))
      const backend = await InProcessBackend.start(engine, data, { settings: { fsync: 'off' } })
      opened.push(() => backend.close())
      const setup = new ReplyScanner()
      setup.feed(backend.exec(Buffer.concat([serialize.query(WIRE_SETUP), parseNamed('pk', WIRE_SELECT)])))
      if (setup.errors > 0) throw new Error(setup.firstError)
      paths.push({ path: OURS_IN_PROCESS, fn: checkedCall((bytes, scanner) => scanner.feed(backend.exec(bytes))) })
      stops.set(OURS_IN_PROCESS, inProcessStopPath(backend))
    } catch (err) {
      failed.set(OURS_IN_PROCESS, errorText(err))
    }
  }
  for (const [path, load] of [
    [CORE_PUBLISHED, loadOurs],
    [PGLITE_HOST, loadPglite],
  ] as const) {
    const loaded = await load()
    if (!loaded.ok) {
      failed.set(path, loaded.reason)
      continue
    }
    try {
      const db: PgliteLike = await loaded.value.create()
      opened.push(() => db.close())
      await db.exec(WIRE_SETUP)
      const setup = new ReplyScanner()
      await db.execProtocolRawStream(parseNamed('pk', WIRE_SELECT), { onRawData: setup.feed })
      if (setup.errors > 0) throw new Error(setup.firstError)
      paths.push({ path, fn: checkedCall((bytes, scanner) => db.execProtocolRawStream(bytes, { onRawData: scanner.feed })) })
      if (path === CORE_PUBLISHED) {
        stops.set(path, { exec: (sql) => db.exec(sql), send: (sql) => db.query(sql).then(() => undefined, messageOf) })
      }
    } catch (err) {
      failed.set(path, errorText(err))
    }
  }
  s.progress(`${WIRE_CASE}: ${paths.length} paths ready`)
  return { paths, failed, stops }
}

/** A wire path's row of `caseName`: its samples, or why it has none. */
function addWireRow(s: SuiteRun, caseName: string, path: string, result: number[] | Error | undefined, failed: Map<string, string>): void {
  const base = { case: caseName, path, side: path === OURS_IN_PROCESS ? ('ours' as const) : ('anchor' as const), unit: 'ms' as const, ...(path === OURS_IN_PROCESS ? {} : { vs: OURS_IN_PROCESS }) }
  const reason = failed.get(path)
  if (reason === 'not built') s.mark({ ...base, status: 'not built', reason: 'run `pnpm engine` first' })
  else if (reason !== undefined) s.mark({ ...base, status: 'failed', reason })
  else if (result instanceof Error) s.mark({ ...base, status: 'failed', reason: errorText(result) })
  else if (result) s.add({ ...base, samples: result })
}

async function addEngineStopRows(s: SuiteRun, stops: Map<string, StopPath>, failed: Map<string, string>): Promise<void> {
  const cases = STOP_CASES.filter((c) => s.wants(c))
  if (cases.length === 0) return
  const measured = new Map<string, number[][] | Error>()
  for (const [path, stop] of stops) {
    measured.set(path, await latencies(stop.exec, stop.send).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))))
  }
  for (const [i, name] of STOP_CASES.entries()) {
    if (!cases.includes(name)) continue
    for (const path of WIRE_PATHS) {
      if (path === PGLITE_HOST) {
        s.mark({ case: name, path, side: 'anchor', unit: 'ms', vs: OURS_IN_PROCESS, status: 'skipped', reason: 'PGlite cannot stop a statement that never calls out of its engine: it runs to its end' })
        continue
      }
      const got = measured.get(path)
      addWireRow(s, name, path, got instanceof Error ? got : got?.[i], failed)
    }
    s.ratio(`${name}: ours in process / pgwasm core on the published engine`, { case: name, path: OURS_IN_PROCESS }, { case: name, path: CORE_PUBLISHED })
  }
}

async function runWire(s: SuiteRun, runs: number): Promise<void> {
  const calls = Math.max(200, Math.round(3000 * s.config.scale)) * runs
  const opened: Array<() => void | Promise<void>> = []
  try {
    const { paths, failed, stops } = await wirePaths(s, opened)
    await addEngineStopRows(s, stops, failed)
    if (!s.wants(WIRE_CASE)) return
    const timed = await timeInterleaved(paths, { iterations: calls, warmup: Math.max(100, Math.round(calls / 10)), rounds: 5 })
    for (const path of WIRE_PATHS) addWireRow(s, WIRE_CASE, path, timed.get(path), failed)
    s.ratio(`${WIRE_CASE}: ours / pgwasm core on the published engine`, { case: WIRE_CASE, path: OURS_IN_PROCESS }, { case: WIRE_CASE, path: CORE_PUBLISHED })
    s.ratio(`${WIRE_CASE}: ours / PGlite`, { case: WIRE_CASE, path: OURS_IN_PROCESS }, { case: WIRE_CASE, path: PGLITE_HOST })
  } finally {
    for (const close of opened.reverse()) await close()
  }
}

export async function run(s: SuiteRun): Promise<void> {
  const cfg = s.config
  const runs = cfg.iterations ?? 5
  const warmup = cfg.warmup ?? 1
  const statements = plan(cfg.scale, warmup, runs)
  Object.assign(s.settings, { scale: cfg.scale, runs, warmup, statements: ENGINE_CASES.map((c) => c.sql(cfg.scale)) })
  s.notes.push(
    'Each sample is one statement timed inside its engine (clock_timestamp() around an EXECUTE in PL/pgSQL): no start-up, protocol or host time.',
    `Ours is \`pnpm engine\`'s build run as PostgreSQL's single-user backend under Node (no core yet); PGlite's published engine runs through PGlite in this process; native through pg.`,
    `Per case: ${warmup} discarded run(s), then ${runs} timed, in one session per engine.`,
    `${WIRE_CASE}: each sample is one whole round trip (Bind/Describe/Execute/Sync of a statement prepared once, reply scanned), in 5 interleaved rounds; ours is the in-process engine behind its minimal host (@pgwasm/engine/in-process), not yet the core.`,
  )

  if (s.wants(WIRE_CASE) || STOP_CASES.some((c) => s.wants(c))) await runWire(s, runs)
  // The statement cases run one plan per engine: none of it when --filter left them all out.
  if (!ENGINE_CASES.some((c) => s.wants(c.name))) return

  const results = new Map<string, number[] | string>()
  try {
    results.set(OURS, runOurs(statements))
    s.progress(`${OURS}: done`)
  } catch (err) {
    results.set(OURS, errorText(err))
  }
  const pglite = await loadPglite()
  if (pglite.ok) {
    const db = await pglite.value.create()
    try {
      results.set(PGLITE, await runThrough(db, statements))
      s.progress(`${PGLITE}: done`)
    } catch (err) {
      results.set(PGLITE, errorText(err))
    } finally {
      await db.close()
    }
  }
  const native = await connectNative(cfg.nativeUrl, cfg.nativeReason)
  if (native.ok) {
    try {
      results.set(NATIVE, await runThrough(native.value, statements))
      s.progress(`${NATIVE}: done`)
    } catch (err) {
      results.set(NATIVE, errorText(err))
    } finally {
      await native.value.end()
    }
  }

  for (const c of ENGINE_CASES) {
    if (!s.wants(c.name)) continue
    for (const path of ENGINE_PATHS) {
      const base = { case: c.name, path, side: path === OURS ? ('ours' as const) : ('anchor' as const), unit: 'ms' as const, ...(path === OURS ? {} : { vs: OURS }) }
      const result = results.get(path)
      if (result === undefined) {
        s.mark({ ...base, status: 'skipped', reason: path === NATIVE ? (native.ok ? 'not run' : native.reason) : pglite.ok ? 'not run' : pglite.reason })
      } else if (typeof result === 'string') {
        s.mark({ ...base, status: result === 'not built' ? 'not built' : 'failed', reason: result === 'not built' ? 'run `pnpm engine` first' : result })
      } else {
        s.add({ ...base, samples: result.filter((_, i) => statements[i]!.caseName === c.name && statements[i]!.timed) })
      }
    }
    s.ratio(`${c.name}: ours / PGlite engine`, { case: c.name, path: OURS }, { case: c.name, path: PGLITE })
  }
}
