import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { connectNative, redact } from './anchors.js'
import { gitSha, machine, versions } from './env.js'
import { errorText, killGroup } from './harness.js'
import { startNative, type NativeServer } from './native.js'
import { BENCH_DIR } from './paths.js'
import { computeRatios, renderText } from './table.js'
import { SUITES, type BenchResult, type SuiteConfig, type SuiteName, type SuiteResult } from './types.js'

const USAGE = `usage: pnpm bench [--suite ${SUITES.join('|')}[,...]] [--filter <case>] [--scale <x>]
                  [--iterations <n>] [--warmup <n>] [--native <postgres://...|auto>] [--json <file>]
                  [--suite-timeout <minutes>]
env: BENCH_SCALE, BENCH_ITERATIONS, BENCH_WARMUP, BENCH_NATIVE, BENCH_SUITE_TIMEOUT (see benchmark/README.md)`

function numberOpt(value: string | undefined, name: string): number | null {
  if (value === undefined || value === '') return null
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`${name} must be a positive number, got ${value}\n${USAGE}`)
    process.exit(64)
  }
  return n
}

const { values } = parseArgs({
  // pnpm passes a literal `--` through when the root script forwards arguments.
  args: process.argv.slice(2).filter((a) => a !== '--'),
  options: {
    suite: { type: 'string', multiple: true },
    filter: { type: 'string' },
    scale: { type: 'string' },
    iterations: { type: 'string' },
    warmup: { type: 'string' },
    native: { type: 'string' },
    json: { type: 'string' },
    'suite-timeout': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
})
if (values.help) {
  console.log(USAGE)
  process.exit(0)
}

const requested = (values.suite ?? ['all']).flatMap((s) => s.split(',')).map((s) => s.trim())
const suites: SuiteName[] = requested.includes('all') ? [...SUITES] : []
for (const name of requested) {
  if (name === 'all') continue
  if (!SUITES.includes(name as SuiteName)) {
    console.error(`unknown suite ${name}\n${USAGE}`)
    process.exit(64)
  }
  if (!suites.includes(name as SuiteName)) suites.push(name as SuiteName)
}

const scale = numberOpt(values.scale ?? process.env.BENCH_SCALE, '--scale') ?? 1
const iterationsOpt = numberOpt(values.iterations ?? process.env.BENCH_ITERATIONS, '--iterations')
const warmupRaw = values.warmup ?? process.env.BENCH_WARMUP
// Zero warm-up is a legitimate choice, unlike zero iterations.
const warmup = warmupRaw === '0' ? 0 : numberOpt(warmupRaw, '--warmup')
const nativeOpt = values.native ?? process.env.BENCH_NATIVE ?? null
// A suite that stops making progress (a server that never answers) must not
// hold the whole run: past this limit it is ended and reported as failed.
const suiteTimeoutMs = (numberOpt(values['suite-timeout'] ?? process.env.BENCH_SUITE_TIMEOUT, '--suite-timeout') ?? 30) * 60_000

let server: NativeServer | undefined
const cleanups: (() => Promise<void>)[] = []
async function cleanup(): Promise<void> {
  for (const c of cleanups.splice(0)) await c().catch(() => {})
}
/** Process group of the suite running now: its servers and browsers end with it. */
let suiteGroup: number | undefined
const endSuiteGroup = (): void => killGroup(suiteGroup)
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    endSuiteGroup()
    void cleanup().finally(() => process.exit(130))
  })
}

let nativeUrl: string | null = null
let nativeReason = 'no native server: pass --native postgres://... or --native auto'
let nativeVersion: string | null = null
if (nativeOpt === 'auto') {
  process.stderr.write('[bench] starting a throwaway PostgreSQL cluster (scripts/native-pg.sh)\n')
  try {
    server = await startNative()
    cleanups.push(() => server!.stop())
    nativeUrl = server.url
  } catch (err) {
    nativeReason = `scripts/native-pg.sh could not start PostgreSQL: ${errorText(err)}`
  }
} else if (nativeOpt) nativeUrl = nativeOpt
if (nativeUrl) {
  const client = await connectNative(nativeUrl, '')
  if (client.ok) {
    const { rows } = await client.value.query<{ server_version: string }>('show server_version')
    nativeVersion = rows[0]?.server_version ?? null
    await client.value.end()
  } else {
    nativeReason = client.reason
    nativeUrl = null
  }
}

const config: SuiteConfig = { scale, iterations: iterationsOpt, warmup, filter: values.filter ?? null, nativeUrl, nativeReason }
const work = mkdtempSync(join(tmpdir(), 'pgwasm-bench-'))
cleanups.push(async () => rmSync(work, { recursive: true, force: true }))

function runSuite(suite: SuiteName): Promise<SuiteResult> {
  const file = join(work, `${suite}.json`)
  const started = performance.now()
  process.stderr.write(`[bench] suite ${suite}\n`)
  return new Promise((done) => {
    // Child stdout goes to our stderr: stdout carries only the tables.
    const child = spawn(process.execPath, ['--import', 'tsx', join(BENCH_DIR, 'src/run-suite.ts'), suite, file], {
      cwd: BENCH_DIR,
      stdio: ['ignore', 2, 2],
      detached: true,
      env: { ...process.env, BENCH_SUITE_CONFIG: JSON.stringify(config) },
    })
    suiteGroup = child.pid
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      process.stderr.write(`[bench] suite ${suite} ran past its limit of ${suiteTimeoutMs / 60_000} minutes: ending it\n`)
      endSuiteGroup()
    }, suiteTimeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      // What the suite started (servers, a browser) ends with it.
      endSuiteGroup()
      suiteGroup = undefined
      try {
        if (timedOut) throw new Error('timed out')
        done(JSON.parse(readFileSync(file, 'utf8')) as SuiteResult)
      } catch {
        done({
          suite,
          status: 'failed',
          reason: timedOut
            ? `ran past its limit of ${suiteTimeoutMs / 60_000} minutes (--suite-timeout) and was ended`
            : `suite process ended (${signal ?? `exit ${code}`}) without a result`,
          durationMs: performance.now() - started,
          settings: {},
          notes: [],
          rows: [],
          ratios: [],
        })
      }
    })
  })
}

const results: SuiteResult[] = []
try {
  for (const suite of suites) {
    const result = await runSuite(suite)
    computeRatios(result)
    results.push(result)
    process.stdout.write(`${renderText(result)}\n`)
  }
} finally {
  await cleanup()
}

const bench: BenchResult = {
  environment: {
    date: new Date().toISOString(),
    ...machine(),
    gitSha: gitSha(),
    versions: versions(),
    nativePostgres: nativeVersion,
    settings: {
      scale,
      iterations: iterationsOpt,
      warmup,
      filter: config.filter,
      native: nativeOpt === 'auto' ? 'auto' : nativeOpt ? redact(nativeOpt) : null,
    },
  },
  suites: results,
}
if (values.json) {
  const out = resolve(process.env.INIT_CWD ?? process.cwd(), values.json)
  mkdirSync(dirname(out), { recursive: true })
  writeFileSync(out, `${JSON.stringify(bench, null, 2)}\n`)
  process.stderr.write(`[bench] wrote ${out}\n`)
}

const broken = results.flatMap((r) =>
  r.status === 'failed' ? [`${r.suite}: ${r.reason}`] : r.rows.filter((row) => row.status === 'failed').map((row) => `${r.suite}: ${row.case} | ${row.path}: ${row.reason}`),
)
if (broken.length > 0) {
  process.stderr.write(`[bench] ${broken.length} failure(s):\n${broken.map((b) => `  ${b}`).join('\n')}\n`)
  process.exitCode = 1
}
