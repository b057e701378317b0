import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type { SuiteRun } from '../harness.js'
import { BENCH_DIR } from '../paths.js'

export const SERVER_RSS = 'pgwasm-server RSS 1 s after "serving"'
export const SERVER_FIRST = 'first start after install (empty cache)'
export const SERVER_LATER = 'later start (cache filled)'

/** How long after "serving" the resident set is read: the server's settled size, not its start's peak. */
const SETTLE_MS = 1000

/** The `pgwasm-server` bin of the workspace's @pgwasm/pglite-socket, or why there is none. */
function serverBin(): { file: string } | { reason: string } {
  try {
    const pkg = createRequire(join(BENCH_DIR, 'package.json')).resolve('@pgwasm/pglite-socket/package.json')
    const file = join(dirname(pkg), 'dist', 'cli.js')
    return existsSync(file) ? { file } : { reason: '@pgwasm/pglite-socket is not built' }
  } catch {
    return { reason: '@pgwasm/pglite-socket is not installed' }
  }
}

/** Starts the real CLI on a free port with `cacheDir` as its cache, and returns its RSS in MB once settled. */
function settledRss(file: string, cacheDir: string): Promise<number> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [file, '--port', '0'], {
      cwd: BENCH_DIR,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PGWASM_CACHE_DIR: cacheDir },
    })
    let out = ''
    let measured: number | undefined
    const deadline = setTimeout(() => child.kill('SIGKILL'), 120_000)
    const onData = (d: Buffer) => {
      out += d.toString()
      if (!/serving/.test(out) || measured !== undefined) return
      measured = -1
      setTimeout(() => {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
        measured = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024
        child.kill('SIGINT')
      }, SETTLE_MS)
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.on('exit', (code) => {
      clearTimeout(deadline)
      if (measured !== undefined && measured > 0) done(measured)
      else fail(new Error(`pgwasm-server exited ${code} before it was measured: ${out.trim().split('\n').slice(-3).join(' / ').slice(0, 300)}`))
    })
  })
}

/**
 * The server started as a new user would after `npm i` (a new, empty cache
 * folder) and again on the cache that start left: the target is the
 * first within 10% of the later.
 */
export async function serverRss(s: SuiteRun, work: string, samples: number): Promise<void> {
  if (!s.wants(SERVER_RSS)) return
  const base = { case: SERVER_RSS, unit: 'MB' as const }
  const bin = serverBin()
  const skip = 'reason' in bin ? bin.reason : existsSync('/proc/self/status') ? undefined : 'reads /proc/<pid>/status, which this OS has not'
  if ('reason' in bin || skip !== undefined) {
    for (const path of [SERVER_FIRST, SERVER_LATER]) s.mark({ ...base, path, side: 'ours', status: 'skipped', reason: skip ?? 'no server' })
    return
  }
  s.notes.push(
    `"${SERVER_RSS}": the real pgwasm-server CLI serving an in-memory database, its VmRSS read ${SETTLE_MS} ms after it printed "serving"; "${SERVER_FIRST}" with a new PGWASM_CACHE_DIR, "${SERVER_LATER}" on the cache that start filled.`,
  )
  const first: number[] = []
  const later: number[] = []
  let failure: string | undefined
  for (let i = 0; i < samples && failure === undefined; i++) {
    const cache = mkdtempSync(join(work, 'server-cache-'))
    try {
      first.push(await settledRss(bin.file, cache))
      later.push(await settledRss(bin.file, cache))
    } catch (err) {
      failure = err instanceof Error ? err.message : String(err)
    } finally {
      rmSync(cache, { recursive: true, force: true })
    }
  }
  for (const [path, values] of [
    [SERVER_FIRST, first],
    [SERVER_LATER, later],
  ] as const) {
    if (failure !== undefined) s.mark({ ...base, path, side: 'ours', status: 'failed', reason: failure })
    else s.add({ ...base, path, side: 'ours', samples: values })
  }
  s.ratio('pgwasm-server RSS: first start after install / later start (target <= 1.1)', { case: SERVER_RSS, path: SERVER_FIRST }, { case: SERVER_RSS, path: SERVER_LATER })
}
