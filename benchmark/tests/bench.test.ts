import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { findBuiltEngine } from '@pgwasm/engine'
import { isCI } from '@pgwasm/test-support/required-tools'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { killGroup } from '../src/harness.js'
import { BENCH_DIR } from '../src/paths.js'
import { FIND_UNIQUE } from '../src/prisma-workload.js'
import { WORKLOAD_NAMES } from '../src/speedtest-sql.js'
import { CORE_PUBLISHED, ENGINE_CASES, ENGINE_PATHS, OURS as ENGINE_OURS, OURS_IN_PROCESS, PGLITE as ENGINE_PGLITE, PGLITE_HOST, WIRE_CASE, WIRE_PATHS } from '../src/suites/engine.js'
import { BROWSER_CASES, BROWSER_PATHS, FIREFOX_CASES, FIREFOX_PATHS, TAB_FAILOVER, WEBKIT_CASES, WEBKIT_PATHS } from '../src/suites/browser.js'
import { FIRST_VISIT_CASES, FIRST_VISIT_PATHS } from '../src/suites/browser-first-visit.js'
import { LIVE_CASES, LIVE_PATHS } from '../src/suites/live.js'
import { OURS, OURS_BRIDGE_NODE, PRISMA_CASES, PRISMA_PATHS } from '../src/suites/prisma.js'
import { RTT_CASES, RTT_PATHS } from '../src/suites/rtt.js'
import { STOP_CASES } from '../src/suites/stop-latency.js'
import { caseNames, SOCKET_PATHS } from '../src/suites/socket.js'
import { TARGETS } from '../src/suites/speedtest-child.js'
import { TOTAL } from '../src/suites/speedtest.js'
import { BULK_KINDS, bulkCase, bulkRows, CLONE, COLD, COLD_RSS, EXT_CLONE, EXT_FIRST, EXT_LATER, EXT_SCHEMA, EXT_SCHEMA_DB, FIRST, LATER, MANY, OPEN, RSS, SCHEMA_DB, SCHEMA_LATER, TESTDB, TESTDB_FILES, TESTDB_ONE_FILE } from '../src/suites/startup.js'
import type { BenchResult, Row, SuiteName } from '../src/types.js'

/**
 * Runs every suite at a tiny scale so a broken suite fails CI. It checks
 * that every row is there with sane numbers or an explicit reason, never
 * how fast anything is.
 */

const ROOT = join(BENCH_DIR, '..')
const work = tempDir('pgwasm-bench-test-')
const jsonFile = join(work, 'result.json')
let result: BenchResult
let run: { status: number | null; stdout: string; stderr: string }

const EXPECTED: Record<SuiteName, { cases: string[]; paths: string[] }> = {
  startup: {
    // The bulk rows' counts follow --scale (0.01 below).
    cases: [FIRST, RSS, COLD, COLD_RSS, SCHEMA_DB, EXT_SCHEMA_DB, TESTDB, TESTDB_FILES, TESTDB_ONE_FILE, LATER, OPEN, CLONE, EXT_FIRST, EXT_LATER, EXT_CLONE, EXT_SCHEMA, SCHEMA_LATER, MANY, ...BULK_KINDS.flatMap((k) => bulkRows(0.01).map((n) => bulkCase(k, n)))],
    paths: ['pgwasm', 'PGlite'],
  },
  rtt: { cases: RTT_CASES, paths: RTT_PATHS },
  speedtest: { cases: [...WORKLOAD_NAMES, TOTAL], paths: TARGETS.map((t) => t.path) },
  socket: { cases: caseNames().map((c) => c.name), paths: SOCKET_PATHS },
  prisma: { cases: [...PRISMA_CASES], paths: PRISMA_PATHS },
  live: { cases: LIVE_CASES, paths: LIVE_PATHS },
  browser: { cases: BROWSER_CASES, paths: BROWSER_PATHS },
  engine: { cases: ENGINE_CASES.map((c) => c.name), paths: ENGINE_PATHS },
}

function nativeAvailable(): boolean {
  // Only when a server binary is already here: the test must not apt-get.
  const onPath = spawnSync('sh', ['-c', 'command -v pg_ctl'], { encoding: 'utf8' }).status === 0
  const debian = existsSync('/usr/lib/postgresql') && readdirSync('/usr/lib/postgresql').some((v) => existsSync(`/usr/lib/postgresql/${v}/bin/pg_ctl`))
  return onPath || debian
}

/**
 * Runs the CLI in its own process group and ends the whole group past
 * `limitMs`: a suite's child that inherited the CLI's stderr would otherwise
 * keep a synchronous spawn waiting for ever after the CLI itself was ended.
 */
function runCli(args: string[], limitMs: number): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, args, { cwd: BENCH_DIR, detached: true, env: { ...process.env, INIT_CWD: BENCH_DIR } })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    const endGroup = () => killGroup(child.pid)
    const timer = setTimeout(() => {
      stderr += `\n[bench test] the CLI ran past ${limitMs / 1000} s: ended it and all it started`
      endGroup()
    }, limitMs)
    child.on('exit', (status) => {
      clearTimeout(timer)
      endGroup()
      // Output still buffered in the pipes arrives before 'close'; do not wait on holders of them.
      setTimeout(() => done({ status, stdout, stderr }), 200)
    })
  })
}

beforeAll(async () => {
  for (const pkg of ['pglite', 'pglite-socket']) {
    const dir = join(ROOT, 'packages', pkg)
    if (existsSync(join(dir, 'package.json')) && !existsSync(join(dir, 'dist', 'index.js'))) {
      const build = spawnSync('npm', ['run', 'build'], { cwd: dir, stdio: 'inherit' })
      if (build.status !== 0) throw new Error(`building packages/${pkg} failed`)
    }
  }
  // Alone on this machine the run takes ~4 min (startup ~95 s, browser ~75 s);
  // beside the rest of CI up to twice that. The limits only stop a hang.
  const args = ['--import', 'tsx', 'src/cli.ts', '--suite', 'all', '--scale', '0.01', '--iterations', '1', '--warmup', '0', '--suite-timeout', '7', '--json', jsonFile]
  if (nativeAvailable()) args.push('--native', 'auto')
  run = await runCli(args, 900_000)
  if (existsSync(jsonFile)) result = JSON.parse(readFileSync(jsonFile, 'utf8')) as BenchResult
}, 960_000)

function rowsOf(suite: SuiteName): Row[] {
  return result.suites.find((s) => s.suite === suite)?.rows ?? []
}

describe('pnpm bench at a tiny scale', () => {
  it('exits 0 and writes JSON with the environment', () => {
    // The CLI's own lines (which suite ran, which failed and why) first: a suite's output can be long.
    const own = run.stderr.split('\n').filter((line) => line.startsWith('[bench'))
    expect(run.status, [...own, '...', run.stderr.slice(-1500)].join('\n')).toBe(0)
    expect(result.environment.node).toBe(process.version)
    expect(result.environment.versions['@electric-sql/pglite']).toBe('0.5.16')
    expect(result.environment.versions['@electric-sql/pglite (under pglite-socket)']).toBe('0.5.16')
    expect(result.suites.map((s) => s.suite)).toEqual(['startup', 'rtt', 'speedtest', 'socket', 'prisma', 'live', 'browser', 'engine'])
  })

  it('browser: the Firefox and WebKit store rows and the first-visit rows are present, measured or explained', () => {
    const rows = rowsOf('browser')
    for (const [cases, paths] of [
      [FIREFOX_CASES, FIREFOX_PATHS],
      [WEBKIT_CASES, WEBKIT_PATHS],
      [FIRST_VISIT_CASES, FIRST_VISIT_PATHS],
    ] as const) {
      for (const c of cases) for (const p of paths) expect(rows.find((r) => r.case === c && r.path === p), `browser: ${c} | ${p}`).toBeDefined()
    }
  })

  for (const suite of Object.keys(EXPECTED) as SuiteName[]) {
    it(`${suite}: every row is present, measured or explained`, () => {
      const rows = rowsOf(suite)
      const { cases, paths } = EXPECTED[suite]
      for (const c of cases) {
        for (const p of paths) {
          const row = rows.find((r) => r.case === c && r.path === p)
          expect(row, `${suite}: ${c} | ${p}`).toBeDefined()
          if (row!.status === 'ok') {
            const s = row!.summary!
            for (const v of [s.p50, s.p95, s.mean, s.trimmedMean, s.min, s.max]) expect(Number.isFinite(v), `${c} | ${p}`).toBe(true)
            expect(s.p50, `${c} | ${p}`).toBeGreaterThan(0)
            expect(s.min).toBeLessThanOrEqual(s.p50)
            expect(s.p50).toBeLessThanOrEqual(s.max)
            expect(s.n).toBeGreaterThan(0)
          } else {
            expect(['skipped', 'not built'], `${c} | ${p}: ${row!.status} ${row!.reason}`).toContain(row!.status)
            expect(row!.reason?.length, `${c} | ${p}`).toBeGreaterThan(0)
          }
        }
      }
      // The table names every case.
      for (const c of cases) expect(run.stdout).toContain(c)
    })
  }

  it('measures our engine and PGlite everywhere they exist', () => {
    // PGlite has no TestDatabase: that row of it is skipped with the reason. Its
    // failover row is skipped with the reason when its other tab gets no
    // answer after the leading tab closed (there is then no failover to time).
    // Nor can it stop a statement that never calls out of its engine: the stop rows of it are skipped too.
    const ourOwn = new Set([TESTDB, TESTDB_FILES, TESTDB_ONE_FILE, TAB_FAILOVER, ...STOP_CASES])
    const mustRun = (suite: SuiteName, pathPrefix: string) =>
      rowsOf(suite)
        .filter((r) => r.path.startsWith(pathPrefix) && !(pathPrefix === 'PGlite' && ourOwn.has(r.case)))
        .forEach((r) => expect(r.status, `${suite}: ${r.case} | ${r.path}: ${r.reason}`).toBe('ok'))
    // browser needs Debian's chromium, which .ci/run installs; without it the rows say so (skipped).
    for (const suite of ['startup', 'rtt', 'speedtest', 'live', ...(existsSync('/usr/bin/chromium') ? (['browser'] as const) : [])] as const) {
      mustRun(suite, 'pgwasm')
      mustRun(suite, 'PGlite')
    }
    mustRun('socket', 'pglite-socket')
    for (const r of rowsOf('prisma').filter((row) => row.path === OURS)) expect(r.status, `${r.case} | ${r.path}: ${r.reason}`).toBe('ok')
    mustRun('prisma', 'pglite-prisma-adapter')
    // Our own engine: .ci/run builds it before the tests; elsewhere its rows say `not built` until `pnpm engine`.
    const engineBuilt = findBuiltEngine() !== undefined || isCI()
    for (const r of rowsOf('engine').filter((row) => row.path === ENGINE_PGLITE || (engineBuilt && row.path === ENGINE_OURS))) {
      expect(r.status, `engine: ${r.case} | ${r.path}: ${r.reason}`).toBe('ok')
    }
    // The wire case's own paths: the published engine's two hosts always, ours once built.
    for (const path of WIRE_PATHS.filter((p) => p !== OURS_IN_PROCESS || engineBuilt)) {
      const r = rowsOf('engine').find((row) => row.case === WIRE_CASE && row.path === path)
      expect(r?.status, `engine: ${WIRE_CASE} | ${path}: ${r?.reason}`).toBe('ok')
    }
    // Runaways stopped at statement_timeout: both engines' pgwasm hosts measure them; PGlite cannot stop them.
    for (const stop of STOP_CASES) {
      for (const path of [CORE_PUBLISHED, ...(engineBuilt ? [OURS_IN_PROCESS] : [])]) {
        const r = rowsOf('engine').find((row) => row.case === stop && row.path === path)
        expect(r?.status, `engine: ${stop} | ${path}: ${r?.reason}`).toBe('ok')
      }
      expect(rowsOf('engine').find((row) => row.case === stop && row.path === PGLITE_HOST)?.status).toBe('skipped')
    }
    // Ours again on the bridge's Node: measured when the bridge ran in another process, else skipped with the reason.
    for (const r of rowsOf('prisma').filter((row) => row.path === OURS_BRIDGE_NODE)) {
      if (r.status !== 'ok') {
        expect(r.status, `${r.case} | ${r.path}`).toBe('skipped')
        expect(r.reason, `${r.case} | ${r.path}`).toContain('the bridge ran on this process')
      }
    }
  })

  it('computes the ratios other issues track', () => {
    const ratio = (suite: SuiteName, name: string) => result.suites.find((s) => s.suite === suite)!.ratios.find((k) => k.name === name)
    for (const [suite, name] of [
      ['startup', 'create() later in process: pgwasm / PGlite'],
      ['rtt', 'query/raw: 100-row select, pgwasm query() / pgwasm raw stream'],
      ['rtt', 'select by pk: pgwasm query() / PGlite query()'],
      ['speedtest', 'total in memory: pgwasm / PGlite'],
      ['prisma', `${FIND_UNIQUE}: pgwasm / pglite-prisma-adapter`],
      ['live', 'write to callback: pgwasm live / PGlite live (target <= 0.5)'],
    ] as const) {
      const k = ratio(suite, name)
      expect(k, name).toBeDefined()
      expect(Number.isFinite(k!.value), `${name}: ${k!.reason}`).toBe(true)
      expect(k!.value).toBeGreaterThan(0)
    }
    const native = ratio('speedtest', 'total in memory: pgwasm / native pg')!
    expect(native.value !== undefined || (native.reason ?? '').length > 0).toBe(true)
    // Anchor rows carry ours/anchor when both ran.
    const pgliteQuery = rowsOf('rtt').find((r) => r.path === 'PGlite query()' && r.case === RTT_CASES[0])!
    expect(Number.isFinite(pgliteQuery.ratio)).toBe(true)
  })

  it('bench:report writes markdown and a chart per suite', () => {
    const out = join(work, 'report')
    const rep = spawnSync(process.execPath, ['--import', 'tsx', 'src/report.ts', jsonFile, '--out', out], { cwd: BENCH_DIR, encoding: 'utf8' })
    expect(rep.status, rep.stderr).toBe(0)
    const md = readFileSync(join(out, 'latest.md'), 'utf8')
    for (const suite of ['startup', 'rtt', 'speedtest', 'socket', 'prisma', 'live']) expect(md).toContain(`## ${suite}`)
    for (const suite of ['startup', 'rtt', 'speedtest', 'socket', 'prisma', 'live']) {
      const svg = readFileSync(join(out, `${suite}.svg`), 'utf8')
      expect(svg.startsWith('<svg')).toBe(true)
      expect(svg).toContain('<rect')
    }
  })
})
