import { spawn, type ChildProcess } from 'node:child_process'
import { Socket } from 'node:net'
import { freePort } from '@pgwasm/test-support/net'
import { loadPg } from '../anchors.js'
import { bundleChild } from '../child.js'
import { errorText, withDeadline, type SuiteRun } from '../harness.js'
import { BENCH_DIR } from '../paths.js'
import { findPgbench, initPgbench, runPgbench } from '../pgbench.js'
import { bindDescribeExecuteSync, parseNamed, ReplyScanner, startupMessage } from '../protocol.js'
import type { Unit } from '../types.js'

/**
 * `pg` clients over 127.0.0.1 against socket servers: each server runs in its
 * own process; all clients live in this one. Per round every server gets the
 * same work in rotating order.
 */

interface Server {
  path: string
  side: 'ours' | 'anchor'
  vs?: string
  status: 'ok' | 'skipped' | 'not built'
  reason?: string
  connection?: { host: string; port: number; user: string; database: string; schema?: string }
  stop?: () => Promise<void>
}

/** How long any one reply may take before its server's rows fail. */
const REPLY_TIMEOUT_MS = 60_000
const OURS = 'pgwasm socket'
export const SOCKET_PATHS = [OURS, 'pglite-socket', 'native pg']
export const CONCURRENCY = [1, 4, 16] as const
export const WORKLOADS = ['select by pk', '100-row select'] as const
export const PIPELINE_BATCH = 100
export const PIPELINED = `pipelined select by pk (1 connection, ${PIPELINE_BATCH} per batch)`
export const PGBENCH_CLIENTS = 8
export const PGBENCH = `pgbench TPC-B-like, ${PGBENCH_CLIENTS} clients: throughput`
/** How long the other client stays idle in its block per sample: a server that makes the query wait for it shows this. */
export const READ_BLOCK_HOLD_MS = 200
export const BEHIND_READ_BLOCK = `select by pk while another client idles in a read-only transaction (ends after ${READ_BLOCK_HOLD_MS} ms): latency`

export function caseNames(): { name: string; unit: Unit }[] {
  const out: { name: string; unit: Unit }[] = []
  for (const w of WORKLOADS) {
    for (const c of CONCURRENCY) {
      out.push({ name: `${w}, ${c} client${c > 1 ? 's' : ''}: latency`, unit: 'ms' }, { name: `${w}, ${c} client${c > 1 ? 's' : ''}: throughput`, unit: 'queries/s' })
    }
  }
  out.push({ name: `${PIPELINED}: batch latency`, unit: 'ms' }, { name: `${PIPELINED}: throughput`, unit: 'queries/s' })
  out.push({ name: PGBENCH, unit: 'tps' })
  out.push({ name: BEHIND_READ_BLOCK, unit: 'ms' })
  return out
}

async function startHost(file: string, impl: 'ours' | 'pglite-socket'): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort()
  const child = spawn(process.execPath, [file, impl, String(port)], { cwd: BENCH_DIR, stdio: ['pipe', 'pipe', 'inherit'] })
  const line = await new Promise<string>((done) => {
    let buf = ''
    const timer = setTimeout(() => done('ERROR server did not start within 120 s'), 120_000)
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString()
      const nl = buf.indexOf('\n')
      if (nl >= 0) {
        clearTimeout(timer)
        done(buf.slice(0, nl))
      }
    })
    child.on('exit', (code) => done(`ERROR server exited ${code}`))
  })
  if (!line.startsWith('READY')) {
    child.kill()
    throw new Error(line.replace(/^ERROR /, ''))
  }
  return { port, child }
}

function stopHost(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null) return done()
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    child.once('exit', () => {
      clearTimeout(timer)
      done()
    })
    child.stdin!.end()
  })
}

function parseUrl(url: string): NonNullable<Server['connection']> {
  const u = new URL(url)
  return { host: u.hostname, port: Number(u.port || 5432), user: decodeURIComponent(u.username || 'postgres'), database: u.pathname.slice(1) || 'postgres' }
}

/** Speaks the wire protocol directly to keep many queries in flight on one connection (pg waits for each reply). */
class PipelineClient {
  readonly #socket = new Socket()
  readonly #scanner = new ReplyScanner()
  #waiter: { ready: number; done: () => void; fail: (e: Error) => void } | undefined

  async connect(c: NonNullable<Server['connection']>): Promise<void> {
    this.#socket.setNoDelay(true)
    this.#socket.on('data', (d: Buffer) => {
      this.#scanner.feed(d)
      this.#check()
    })
    this.#socket.on('error', (e) => this.#waiter?.fail(e))
    await new Promise<void>((done, fail) => {
      this.#socket.once('error', fail)
      this.#socket.connect(c.port, c.host, done)
    })
    // Trust authentication: the startup reply ends with ReadyForQuery.
    await this.send(startupMessage(c.user, c.database), 1)
    if (c.schema) await this.send(Buffer.from(`Q${'\0'.repeat(4)}set search_path to ${c.schema}\0`), 1, true)
  }

  #check(): void {
    const w = this.#waiter
    if (!w) return
    if (this.#scanner.errors > 0) w.fail(new Error(`server error: ${this.#scanner.firstError}`))
    else if (this.#scanner.readyCount >= w.ready) w.done()
  }

  /** Writes the bytes and resolves after `ready` ReadyForQuery messages. */
  send(bytes: Buffer, ready: number, fixLength = false): Promise<void> {
    if (fixLength) bytes.writeInt32BE(bytes.length - 1, 1)
    this.#scanner.reset()
    const replied = new Promise<void>((done, fail) => {
      this.#waiter = {
        ready,
        done: () => {
          this.#waiter = undefined
          done()
        },
        fail: (e) => {
          this.#waiter = undefined
          fail(e)
        },
      }
      this.#socket.write(bytes)
    })
    return withDeadline(replied, REPLY_TIMEOUT_MS, `${ready} ReadyForQuery`)
  }

  close(): void {
    this.#socket.end(Buffer.from([0x58, 0, 0, 0, 4]))
    this.#socket.destroy()
  }
}

export async function run(s: SuiteRun): Promise<void> {
  const cfg = s.config
  const rounds = cfg.iterations ?? 5
  const perRound = Math.max(16, Math.round(1600 * cfg.scale))
  const warmup = cfg.warmup ?? Math.max(16, Math.round(160 * cfg.scale))
  const batches = Math.max(2, Math.round(20 * cfg.scale))
  const pgbenchTx = Math.max(5, Math.round(100 * cfg.scale))
  Object.assign(s.settings, {
    rounds,
    queriesPerRound: perRound,
    warmupQueriesPerClient: warmup,
    pipelineBatchesPerRound: batches,
    batchSize: PIPELINE_BATCH,
    pgbench: `-c ${PGBENCH_CLIENTS} -t ${pgbenchTx} per round, after -i -I dtGvp -s 1`,
  })
  s.notes.push(
    `Per round, ${perRound} queries split over the clients; latency is per query (pg client.query, extended protocol, unnamed statement), throughput is queries per second of wall time per round.`,
    'pg sends Parse(unnamed)/Bind/Describe/Execute/Sync for every query: native PostgreSQL and pglite-socket parse and plan it each time; pgwasm socket parses a repeated query once per client and binds the statement it kept (packages/pglite-socket README, "Many clients, one session").',
    'Each server runs in its own process; every server gets the same rounds in rotating order. The pglite-socket server runs @electric-sql/pglite 0.5.16 in memory (pnpm override).',
    `Pipelined: one raw connection writes ${PIPELINE_BATCH} Bind/Execute/Sync of a prepared select by pk at once and waits for all replies.`,
    `pgbench: built-in TPC-B-like script, -c ${PGBENCH_CLIENTS} -t ${pgbenchTx} per round (tps without connection time), on tables from pgbench -i -I dtGvp -s 1 (server-side generation on every target); one untimed warm-up run first.`,
  )
  const pg = await loadPg()
  const pgbench = findPgbench()
  const pgbenchFailed = new Map<string, string>()
  const servers: Server[] = []
  const hosts: ChildProcess[] = []
  const file = await bundleChild('suites/socket-server.ts')

  // Ours: detected by import, so the rows switch on when the package lands.
  try {
    const name = '@pgwasm/pglite-socket'
    await import(name)
    try {
      const { port, child } = await startHost(file, 'ours')
      hosts.push(child)
      servers.push({ path: OURS, side: 'ours', status: 'ok', connection: { host: '127.0.0.1', port, user: 'postgres', database: 'postgres' } })
    } catch (err) {
      servers.push({ path: OURS, side: 'ours', status: 'skipped', reason: `server did not start: ${errorText(err)}` })
    }
  } catch (err) {
    servers.push({ path: OURS, side: 'ours', status: 'not built', reason: `@pgwasm/pglite-socket does not load (${errorText(err)})` })
  }
  try {
    const { port, child } = await startHost(file, 'pglite-socket')
    hosts.push(child)
    servers.push({ path: 'pglite-socket', side: 'anchor', vs: OURS, status: 'ok', connection: { host: '127.0.0.1', port, user: 'postgres', database: 'postgres' } })
  } catch (err) {
    servers.push({ path: 'pglite-socket', side: 'anchor', vs: OURS, status: 'skipped', reason: `@electric-sql/pglite-socket did not start: ${errorText(err)}` })
  }
  if (cfg.nativeUrl) {
    servers.push({ path: 'native pg', side: 'anchor', vs: OURS, status: 'ok', connection: { ...parseUrl(cfg.nativeUrl), schema: 'pgwasm_bench_socket' } })
  } else servers.push({ path: 'native pg', side: 'anchor', vs: OURS, status: 'skipped', reason: cfg.nativeReason })
  if (!pg.ok) for (const sv of servers) if (sv.status === 'ok') Object.assign(sv, { status: 'skipped', reason: pg.reason })

  const live = servers.filter((sv) => sv.status === 'ok')
  const samples = new Map<string, number[]>()
  const failed = new Map<string, string>()
  const key = (c: string, p: string) => `${c}\u0000${p}`
  const push = (c: string, p: string, values: number[]) => {
    const k = key(c, p)
    samples.set(k, [...(samples.get(k) ?? []), ...values])
  }
  type PgClient = import('pg').Client
  const connect = async (sv: Server): Promise<PgClient> => {
    if (!pg.ok) throw new Error(pg.reason)
    const c = sv.connection!
    // A server that stops answering fails its rows instead of holding the suite.
    const client = new pg.value.Client({
      host: c.host,
      port: c.port,
      user: c.user,
      database: c.database,
      connectionTimeoutMillis: REPLY_TIMEOUT_MS,
      query_timeout: REPLY_TIMEOUT_MS,
    })
    await client.connect()
    if (c.schema) await client.query(`set search_path to ${c.schema}`)
    return client
  }

  try {
    // Same tables on every server.
    for (const sv of live) {
      try {
        const client = await connect(sv)
        const schema = sv.connection!.schema
        if (schema) await client.query(`drop schema if exists ${schema} cascade; create schema ${schema}; set search_path to ${schema}`)
        await client.query(`create table t1 (id int primary key, a int);
          insert into t1 select g, g * 7 from generate_series(1, 1000) g;
          create table t100 (id int primary key, a int, b int, c text, d text);
          insert into t100 select g, g * 3, g * 7, 'text value ' || g, 'another text ' || g * 11 from generate_series(1, 100) g`)
        await client.end()
      } catch (err) {
        failed.set(sv.path, `setup: ${errorText(err)}`)
      }
    }
    const queryOf = (w: (typeof WORKLOADS)[number], i: number) =>
      w === 'select by pk' ? { text: 'select * from t1 where id = $1', values: [(i % 1000) + 1] } : { text: 'select id, a, b, c, d from t100', values: [] }
    const expectRows = (w: (typeof WORKLOADS)[number]) => (w === 'select by pk' ? 1 : 100)

    for (const w of WORKLOADS) {
      for (const conc of CONCURRENCY) {
        const base = `${w}, ${conc} client${conc > 1 ? 's' : ''}`
        if (!s.wants(`${base}: latency`) && !s.wants(`${base}: throughput`)) continue
        const perClient = Math.max(1, Math.ceil(perRound / conc))
        const clients = new Map<string, PgClient[]>()
        for (const sv of live) {
          if (failed.has(sv.path)) continue
          try {
            const list: PgClient[] = []
            for (let c = 0; c < conc; c++) list.push(await connect(sv))
            // Explicit warm-up on every connection.
            await Promise.all(list.map(async (cl, c) => {
              for (let i = 0; i < Math.ceil(warmup / conc); i++) await cl.query(queryOf(w, i + c))
            }))
            clients.set(sv.path, list)
          } catch (err) {
            failed.set(sv.path, errorText(err))
          }
        }
        for (let r = 0; r < rounds; r++) {
          for (let k = 0; k < live.length; k++) {
            const sv = live[(k + r) % live.length]!
            const list = clients.get(sv.path)
            if (!list || failed.has(sv.path)) continue
            try {
              const lat: number[] = []
              const t0 = performance.now()
              await Promise.all(
                list.map(async (cl, c) => {
                  for (let i = 0; i < perClient; i++) {
                    const q = queryOf(w, c * 7919 + i * 13 + r)
                    const t = performance.now()
                    const res = await cl.query(q)
                    lat.push(performance.now() - t)
                    if (res.rows.length !== expectRows(w)) throw new Error(`${res.rows.length} rows, expected ${expectRows(w)}`)
                  }
                }),
              )
              const wall = performance.now() - t0
              push(`${base}: latency`, sv.path, lat)
              push(`${base}: throughput`, sv.path, [(perClient * conc * 1000) / wall])
            } catch (err) {
              failed.set(sv.path, errorText(err))
            }
          }
        }
        for (const list of clients.values()) await Promise.all(list.map((cl) => withDeadline(cl.end(), REPLY_TIMEOUT_MS, 'end').catch(() => {})))
        s.progress(`${base} done`)
      }
    }

    if (s.wants(`${PIPELINED}: throughput`) || s.wants(`${PIPELINED}: batch latency`)) {
      const conns = new Map<string, { client: PipelineClient; statement: string }>()
      for (const sv of live) {
        if (failed.has(sv.path)) continue
        try {
          const client = new PipelineClient()
          await client.connect(sv.connection!)
          const statement = `bench_pk_${Date.now()}`
          await client.send(parseNamed(statement, 'select * from t1 where id = $1'), 1)
          const batch = (b: number) =>
            Buffer.concat(Array.from({ length: PIPELINE_BATCH }, (_, i) => bindDescribeExecuteSync([((b * PIPELINE_BATCH + i) % 1000) + 1], statement)))
          for (let b = 0; b < Math.max(1, Math.ceil(warmup / PIPELINE_BATCH)); b++) await client.send(batch(b), PIPELINE_BATCH)
          conns.set(sv.path, { client, statement })
        } catch (err) {
          failed.set(sv.path, `pipelined: ${errorText(err)}`)
        }
      }
      for (let r = 0; r < rounds; r++) {
        for (let k = 0; k < live.length; k++) {
          const sv = live[(k + r) % live.length]!
          const conn = conns.get(sv.path)
          if (!conn || failed.has(sv.path)) continue
          try {
            const lat: number[] = []
            const t0 = performance.now()
            for (let b = 0; b < batches; b++) {
              const bytes = Buffer.concat(
                Array.from({ length: PIPELINE_BATCH }, (_, i) => bindDescribeExecuteSync([((b * 31 + i * 17 + r) % 1000) + 1], conn.statement)),
              )
              const t = performance.now()
              await conn.client.send(bytes, PIPELINE_BATCH)
              lat.push(performance.now() - t)
            }
            push(`${PIPELINED}: batch latency`, sv.path, lat)
            push(`${PIPELINED}: throughput`, sv.path, [(batches * PIPELINE_BATCH * 1000) / (performance.now() - t0)])
          } catch (err) {
            failed.set(sv.path, `pipelined: ${errorText(err)}`)
          }
        }
      }
      for (const c of conns.values()) c.client.close()
    }

    if (s.wants(BEHIND_READ_BLOCK)) {
      // psycopg's, JDBC's and SQLAlchemy's default (autocommit off): a block opened for a read, then idle.
      const perSample = Math.max(3, Math.round(10 * cfg.scale))
      for (let r = 0; r < rounds; r++) {
        for (let k = 0; k < live.length; k++) {
          const sv = live[(k + r) % live.length]!
          if (failed.has(sv.path)) continue
          let idler: PgClient | undefined
          let asker: PgClient | undefined
          try {
            idler = await connect(sv)
            asker = await connect(sv)
            await asker.query(queryOf('select by pk', r))
            const lat: number[] = []
            for (let i = 0; i < perSample; i++) {
              await idler.query('begin')
              await idler.query('select count(*) from t1')
              const ends = new Promise((resolve) => setTimeout(resolve, READ_BLOCK_HOLD_MS)).then(() => idler!.query('commit'))
              const t = performance.now()
              const res = await asker.query(queryOf('select by pk', i + r))
              lat.push(performance.now() - t)
              if (res.rows.length !== 1) throw new Error(`${res.rows.length} rows, expected 1`)
              await ends
            }
            push(BEHIND_READ_BLOCK, sv.path, lat)
          } catch (err) {
            failed.set(sv.path, `behind a read block: ${errorText(err)}`)
          } finally {
            await idler?.end().catch(() => {})
            await asker?.end().catch(() => {})
          }
        }
      }
      s.progress('behind a read block done')
    }

    if (s.wants(PGBENCH) && pgbench.ok) {
      const bin = pgbench.value
      const ready: Server[] = []
      for (const sv of live) {
        if (failed.has(sv.path)) continue
        try {
          await initPgbench(bin, sv.connection!)
          await runPgbench(bin, sv.connection!, PGBENCH_CLIENTS, Math.max(5, Math.round(pgbenchTx / 10)))
          ready.push(sv)
        } catch (err) {
          pgbenchFailed.set(sv.path, errorText(err))
        }
      }
      for (let r = 0; r < rounds; r++) {
        for (let k = 0; k < ready.length; k++) {
          const sv = ready[(k + r) % ready.length]!
          if (pgbenchFailed.has(sv.path)) continue
          try {
            const res = await runPgbench(bin, sv.connection!, PGBENCH_CLIENTS, pgbenchTx)
            if (res.failed > 0 || res.processed !== res.expected) {
              pgbenchFailed.set(sv.path, `round ${r + 1}: ${res.failed} failed transactions, ${res.processed}/${res.expected} processed`)
            } else push(PGBENCH, sv.path, [res.tps])
          } catch (err) {
            pgbenchFailed.set(sv.path, errorText(err))
          }
        }
      }
      s.progress('pgbench done')
    }
  } finally {
    for (const sv of live) {
      const schema = sv.connection?.schema
      if (schema && pg.ok) {
        const client = await connect(sv).catch(() => undefined)
        await client?.query(`drop schema if exists ${schema} cascade`).catch(() => {})
        await client?.end().catch(() => {})
      }
    }
    for (const h of hosts) await stopHost(h)
  }

  const pk1 = 'select by pk, 1 client'
  const pk16 = 'select by pk, 16 clients'
  s.ratio(`${pk1} latency: pgwasm socket / pglite-socket`, { case: `${pk1}: latency`, path: OURS }, { case: `${pk1}: latency`, path: 'pglite-socket' })
  s.ratio(`${pk16} throughput: pgwasm socket / pglite-socket (above 1 is better)`, { case: `${pk16}: throughput`, path: OURS }, { case: `${pk16}: throughput`, path: 'pglite-socket' })
  s.ratio(`${pk1} latency: pgwasm socket / native pg`, { case: `${pk1}: latency`, path: OURS }, { case: `${pk1}: latency`, path: 'native pg' })
  s.ratio('pgbench tps: pgwasm socket / pglite-socket (target >= 2, above 1 is better)', { case: PGBENCH, path: OURS }, { case: PGBENCH, path: 'pglite-socket' })
  s.ratio('select by pk behind an idle read-only transaction: pgwasm socket / native pg (target <= 2)', { case: BEHIND_READ_BLOCK, path: OURS }, { case: BEHIND_READ_BLOCK, path: 'native pg' })
  for (const { name, unit } of caseNames()) {
    if (!s.wants(name)) continue
    for (const sv of servers) {
      const base = { case: name, path: sv.path, side: sv.side, unit, ...(sv.vs ? { vs: sv.vs } : {}) }
      if (sv.status !== 'ok') s.mark({ ...base, status: sv.status, reason: sv.reason ?? '' })
      else if (failed.has(sv.path)) s.mark({ ...base, status: 'failed', reason: failed.get(sv.path)! })
      else if (name === PGBENCH && !pgbench.ok) s.mark({ ...base, status: 'skipped', reason: pgbench.reason })
      else if (name === PGBENCH && pgbenchFailed.has(sv.path)) s.mark({ ...base, status: 'failed', reason: pgbenchFailed.get(sv.path)! })
      else s.add({ ...base, samples: samples.get(key(name, sv.path)) ?? [] })
    }
  }
}
