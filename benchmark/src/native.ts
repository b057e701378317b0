import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { BENCH_DIR } from './paths.js'

const run = promisify(execFile)
const SCRIPT = join(BENCH_DIR, 'scripts', 'native-pg.sh')

export interface NativeServer {
  url: string
  stop(): Promise<void>
}

/** Starts the throwaway cluster of scripts/native-pg.sh (installing Debian's postgresql if missing). */
export async function startNative(): Promise<NativeServer> {
  // apt-get may run on first use: allow it minutes, not seconds.
  const { stdout } = await run('bash', [SCRIPT, 'start'], { timeout: 600_000, maxBuffer: 1 << 20 })
  const dir = /^PGWASM_NATIVE_DIR=(.+)$/m.exec(stdout)?.[1]
  const url = /^PGWASM_NATIVE_URL=(.+)$/m.exec(stdout)?.[1]
  if (!dir || !url) throw new Error(`native-pg.sh printed no URL: ${stdout.slice(0, 200)}`)
  let stopped: Promise<void> | undefined
  return {
    url,
    stop: () => {
      stopped ??= run('bash', [SCRIPT, 'stop', dir], { timeout: 120_000 }).then(() => undefined)
      return stopped
    },
  }
}
