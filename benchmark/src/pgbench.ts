import { execFile } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import type { Loaded } from './anchors.js'

/** Debian's postgresql-client puts pgbench on PATH; the server packages keep a copy per major version. */
export function findPgbench(): Loaded<string> {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(`${dir}/pgbench`)) return { ok: true, value: `${dir}/pgbench` }
  }
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a)) : []
  for (const v of versions) {
    const bin = `/usr/lib/postgresql/${v}/bin/pgbench`
    if (existsSync(bin)) return { ok: true, value: bin }
  }
  return { ok: false, reason: 'pgbench not found on PATH or in /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql-client)' }
}

export interface PgbenchTarget {
  host: string
  port: number
  user: string
  database: string
  /** Where the pgbench_* tables live (native runs in its own schema); sent as a startup option. */
  schema?: string
}

export interface PgbenchRun {
  tps: number
  processed: number
  expected: number
  failed: number
}

function env(t: PgbenchTarget): NodeJS.ProcessEnv {
  return {
    ...process.env,
    // No TLS or GSS negotiation: the in-process servers answer it with a refusal, so it would only add a round trip.
    PGSSLMODE: 'disable',
    PGGSSENCMODE: 'disable',
    ...(t.schema ? { PGOPTIONS: `-c search_path=${t.schema}` } : {}),
  }
}

function pgbench(bin: string, t: PgbenchTarget, args: string[], timeoutMs: number): Promise<string> {
  const conn = ['-h', t.host, '-p', String(t.port), '-U', t.user]
  return new Promise((done, fail) => {
    execFile(bin, [...conn, ...args, t.database], { env: env(t), timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (err) fail(new Error(`pgbench ${args.join(' ')}: ${(stderr || err.message).trim().split('\n').slice(-2).join(' / ')}`))
      else done(`${stdout}\n${stderr}`)
    })
  })
}

/**
 * `pgbench -i` with server-side data generation (`-I dtGvp`): the `g`
 * step's COPY FROM STDIN fails on @electric-sql/pglite-socket, and every
 * target gets the same initialization.
 */
export async function initPgbench(bin: string, t: PgbenchTarget): Promise<void> {
  await pgbench(bin, t, ['-i', '-I', 'dtGvp', '-s', '1', '-q'], 300_000)
}

/**
 * One built-in TPC-B-like run. Resolves with what pgbench reported; the
 * caller decides what a failed or missing transaction means.
 * @throws when pgbench exits non-zero (e.g. a client aborted) or prints no tps.
 */
export async function runPgbench(bin: string, t: PgbenchTarget, clients: number, transactions: number): Promise<PgbenchRun> {
  const out = await pgbench(bin, t, ['-c', String(clients), '-t', String(transactions)], 600_000)
  const tps = /^tps = ([\d.]+) \(without initial connection time\)/m.exec(out)
  const processed = /^number of transactions actually processed: (\d+)\/(\d+)/m.exec(out)
  const failed = /^number of failed transactions: (\d+)/m.exec(out)
  if (!tps || !processed) throw new Error(`pgbench printed no tps: ${out.trim().slice(-300)}`)
  return { tps: Number(tps[1]), processed: Number(processed[1]), expected: Number(processed[2]), failed: failed ? Number(failed[1]) : 0 }
}
