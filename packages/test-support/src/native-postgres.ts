/**
 * Debian's PostgreSQL server binaries for tests that compare with (or load
 * into) a throwaway native cluster; shared by the core's and the socket
 * package's tests.
 */
import { execFileSync } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { freePort, HOST } from './net.js'
import { run } from './processes.js'
import { findClient, isCI, nativeBinDir, requireUnderCI } from './required-tools.js'

export interface NativeInstall {
  /** Directory of initdb and pg_ctl. */
  bin: string
  /** The psql client, when installed. */
  psql: string | undefined
  /** Runs initdb and pg_ctl as this user when we are root (initdb refuses root). */
  asUser: string | undefined
}

/**
 * The newest installed server version, or undefined when there is none
 * usable (tests then skip). Under `CI=true` a missing one throws instead, so
 * the differential suites cannot quietly stop running (required-tools.ts).
 */
export function findNativePostgres(): NativeInstall | undefined {
  const bin = nativeBinDir()
  if (!bin) {
    requireUnderCI('native', false)
    return undefined
  }
  const psql = findClient('psql')
  if (process.getuid?.() !== 0) return { bin, psql, asUser: undefined }
  try {
    execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' })
    execFileSync('runuser', ['--help'], { stdio: 'ignore' })
  } catch (cause) {
    // initdb refuses root: without a postgres user to run it as, the cluster cannot be made.
    if (isCI()) throw new Error(`native PostgreSQL is installed at ${bin}, but as root it needs a \`postgres\` user and runuser`, { cause })
    return undefined
  }
  return { bin, psql, asUser: 'postgres' }
}

export interface NativeServer {
  port: number
  /** The cluster's directory: its Unix socket (psql's `-h`), its log, and room for a test's files. */
  dir: string
  stop(): Promise<void>
}

/** A throwaway cluster under /tmp on 127.0.0.1 (trust, user postgres), removed by `stop()`. */
export async function startNativePostgres(native: NativeInstall): Promise<NativeServer> {
  const dir = mkdtempSync('/tmp/pgwasm-native-')
  const asUser = (command: string, args: string[]): [string, string[]] =>
    native.asUser ? ['runuser', ['-u', native.asUser, '--', command, ...args]] : [command, args]
  if (native.asUser) {
    const uid = Number(execFileSync('id', ['-u', native.asUser]).toString().trim())
    const gid = Number(execFileSync('id', ['-g', native.asUser]).toString().trim())
    chownSync(dir, uid, gid)
  }
  const port = await freePort()
  const data = join(dir, 'data')
  const stop = async (): Promise<void> => {
    await run(...asUser(join(native.bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']), { timeoutMs: 60_000 }).catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    const init = await run(...asUser(join(native.bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C']), {
      timeoutMs: 120_000,
    })
    if (init.code !== 0) throw new Error(`initdb failed: ${init.stderr}`)
    const options = `-p ${port} -k ${dir} -c listen_addresses=${HOST} -c timezone=UTC -c fsync=off`
    const started = await run(...asUser(join(native.bin, 'pg_ctl'), ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', options, 'start']), {
      timeoutMs: 120_000,
    })
    if (started.code !== 0) throw new Error(`pg_ctl start failed: ${started.stderr}`)
  } catch (err) {
    await stop()
    throw err
  }
  return { port, dir, stop }
}
