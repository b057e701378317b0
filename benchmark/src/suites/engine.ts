import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findBuiltEngine, initCluster, runSingleUser } from '@pgwasm/engine'
import { connectNative, loadPglite } from '../anchors.js'
import { errorText, type SuiteRun } from '../harness.js'

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

/** Our engine: initdb, then one single-user backend runs the whole plan from its stdin. */
function runOurs(statements: ReturnType<typeof plan>): number[] {
  const engine = findBuiltEngine()
  if (!engine) throw new Error('not built')
  const work = mkdtempSync(join(tmpdir(), 'pgwasm-bench-engine-'))
  try {
    const data = join(work, 'data')
    const init = initCluster(engine, data, ['--no-sync'])
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr.trim().split('\n').slice(-2).join(' / ')}`)
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
  )

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
