import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { connect } from 'node:net'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { queryFrame, startupPacket } from '@pgwasm/test-support/frontend'
import { HOST, freePort } from '@pgwasm/test-support/net'
import { hasProgram, libpqEnv } from '@pgwasm/test-support/processes'
import { sendCancelRequest, withRawClient } from '@pgwasm/test-support/raw-client'
import { Cli, backendKey, endQuietly, pgClient, useDatabase } from './helpers.js'
import { PGliteServer } from '../src/index.js'

/*
 * A statement that runs is stopped by its client's CancelRequest, or by its
 * client leaving (issue "no way to stop a statement": pg_sleep ran to its
 * end after either). The engine holds the server's thread while it runs, so
 * the server runs as the CLI in its own process here: clients in this
 * process must go on sending while it works, as real clients do.
 */
describe('stopping a running statement', () => {
  let cli: Cli
  let url: string
  let port: number

  beforeAll(async () => {
    cli = new Cli(['--port', '0'])
    url = (await cli.waitFor(/serving .* at (postgresql:\/\/\S+)/))[1]!
    port = Number(new URL(url).port)
    const setup = new pg.Client({ connectionString: url })
    await setup.connect()
    await setup.query('create table t (n int)')
    await setup.end()
  }, 120_000)

  afterAll(() => cli?.kill())

  async function client(): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: url })
    c.on('error', () => {})
    await c.connect()
    return c
  }

  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

  it('a CancelRequest fails a running pg_sleep with 57014 inside its transaction, which the client then rolls back; the others carry on', async () => {
    const a = await client()
    const others = await Promise.all([client(), client(), client()])
    try {
      await a.query('begin')
      await a.query('insert into t values (1)')
      // Inside its transaction block a client keeps the engine: its statement runs at once, it never waits.
      const started = performance.now()
      // Settled into a value at once: it fails while the cancel is still being sent.
      const sleeping = a.query('select pg_sleep(30)').then(
        () => undefined,
        (err: unknown) => err,
      )
      await sleep(300)
      const answers = others.map((o, i) => o.query('select $1::int as i', [i]))
      const { processId, secret } = backendKey(a)
      await sendCancelRequest(port, processId, secret)
      expect(await within(sleeping, 10_000, 'the canceled pg_sleep')).toMatchObject({
        code: '57014',
        message: 'canceling statement due to user request',
      })
      expect(performance.now() - started).toBeLessThan(15_000)
      await expect(a.query('select 1')).rejects.toMatchObject({ code: '25P02' })
      await a.query('rollback')
      expect((await a.query('select count(*)::int as n from t')).rows).toEqual([{ n: 0 }])
      expect((await Promise.all(answers)).map((r) => r.rows[0])).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }])
    } finally {
      await Promise.all([a, ...others].map(endQuietly))
    }
  })

  it('ignores a CancelRequest with a wrong secret: the statement runs to its end', async () => {
    const a = await client()
    try {
      const sleeping = a.query('select pg_sleep(1.5) as slept')
      await sleep(300)
      const { processId, secret } = backendKey(a)
      await sendCancelRequest(port, processId, (secret ^ 1) >>> 0)
      await sendCancelRequest(port, processId + 1, secret)
      expect((await within(sleeping, 10_000, 'the pg_sleep')).rows).toEqual([{ slept: '' }])
    } finally {
      await endQuietly(a)
    }
  })

  it("postgres.js' query.cancel() stops a running extended-protocol query that spills to disk", async () => {
    const sql = postgres(url, { max: 1, onnotice: () => {} })
    try {
      // A series this long is written to a temporary file: it calls out of the engine while it works.
      const counting = sql`select count(*) from generate_series(1, ${500_000_000}::bigint)`.execute()
      const outcome = counting.then(
        () => undefined,
        (err: unknown) => err,
      )
      await sleep(500)
      counting.cancel()
      expect(await within(outcome, 20_000, 'the canceled count')).toMatchObject({ code: '57014' })
      expect(await sql`select 42 as n`).toEqual([{ n: 42 }])
    } finally {
      await sql.end({ timeout: 5 })
    }
  })

  it.skipIf(!hasProgram('psql'))("psql's Ctrl-C cancels its running query", async () => {
    const psql = spawn('psql', ['-X', '-w', '-v', 'ON_ERROR_STOP=1', '-c', 'select pg_sleep(30)', url], {
      env: libpqEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    psql.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    const exited = new Promise<number | null>((resolve) => psql.once('exit', (code) => resolve(code)))
    try {
      await sleep(1000)
      psql.kill('SIGINT')
      expect(await within(exited, 15_000, 'psql to exit after Ctrl-C')).toBe(1)
      expect(stderr).toContain('canceling statement due to user request')
    } finally {
      if (psql.exitCode === null) psql.kill('SIGKILL')
    }
  })

  it('a client that sends its next queries while a long one runs gets every answer, in order (its bytes read early are kept)', async () => {
    await withRawClient(port, async (raw) => {
      raw.write(queryFrame('select pg_sleep(0.4)'))
      await sleep(150)
      // Read from the socket while the engine works, to see whether the client left: they must still run, after it.
      raw.write(Buffer.concat([queryFrame('select 1 as n'), queryFrame("select 'two' as t")]))
      const answers: string[] = []
      for (let i = 0; i < 3; i++) {
        const messages = await within(raw.until('Z'), 10_000, `answer ${i + 1}`)
        answers.push(messages.map((m) => m.type).join(''))
      }
      expect(answers).toEqual(['TDCZ', 'TDCZ', 'TDCZ'])
    })
  })

  it('a client that leaves mid-statement has it stopped and its transaction rolled back; the next client is served at once', async () => {
    const socket = connect(port, HOST)
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    socket.write(startupPacket())
    await sleep(300)
    socket.write(queryFrame('begin; insert into t values (2); select pg_sleep(30)'))
    await sleep(300)
    socket.destroy()
    const b = await client()
    try {
      const started = performance.now()
      expect((await within(b.query('select count(*)::int as n from t'), 10_000, "the next client's query")).rows).toEqual([{ n: 0 }])
      expect(performance.now() - started).toBeLessThan(10_000)
    } finally {
      await endQuietly(b)
    }
  })
})

describe('the cancel helper', () => {
  const database = useDatabase()

  it('is left out with cancelRunning: false, and cancelReady says so', async () => {
    const server = new PGliteServer({ db: database.db, port: 0, cancelRunning: false })
    await server.start()
    try {
      expect(await server.cancelReady).toBe(false)
    } finally {
      await server.stop()
    }
  })

  it('works from the bundled CLI, as installed: a CancelRequest stops a running pg_sleep', async () => {
    const cli = new Cli(['--port', '0'], { built: true })
    try {
      const url = (await cli.waitFor(/serving .* at (postgresql:\/\/\S+)/))[1]!
      const a = new pg.Client({ connectionString: url })
      a.on('error', () => {})
      await a.connect()
      try {
        const outcome = a.query('select pg_sleep(30)').then(
          () => undefined,
          (err: unknown) => err,
        )
        await new Promise((resolve) => setTimeout(resolve, 300))
        const { processId, secret } = backendKey(a)
        await sendCancelRequest(Number(new URL(url).port), processId, secret)
        expect(await within(outcome, 10_000, 'the canceled pg_sleep')).toMatchObject({ code: '57014' })
      } finally {
        await endQuietly(a)
      }
      expect(cli.stderr).not.toMatch(/cancel helper|ReferenceError/)
    } finally {
      cli.kill()
    }
  })

  it('ends with its server however the server dies: SIGKILL while the helper holds clients, then a new server on the same port at once', async () => {
    const port = await freePort()
    const first = new Cli(['--port', String(port)])
    const a = new pg.Client({ host: HOST, port, user: 'postgres' })
    a.on('error', () => {})
    const waiting: pg.Client[] = []
    try {
      await first.waitFor(/serving .* at (postgresql:\/\/\S+)/)
      await a.connect()
      // The server's thread runs a statement: the helper takes the clients that come meanwhile.
      void a.query('select pg_sleep(30)').catch(() => {})
      await new Promise((resolve) => setTimeout(resolve, 300))
      for (let i = 0; i < 4; i++) {
        // Generous: on a loaded CI machine the helper's handshakes took over 5 s; what is tested is the helper's end.
        const c = new pg.Client({ host: HOST, port, user: 'postgres', connectionTimeoutMillis: 20_000 })
        c.on('error', () => {})
        waiting.push(c)
      }
      await within(Promise.all(waiting.map((c) => c.connect())), 25_000, 'clients the helper lets in while the server is busy')
      // tsx's esbuild is a child too: the helper is the node child with its small heap.
      const helpers = childrenOf(first.child.pid!).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes('--max-old-space-size=32'))
      expect(helpers).toHaveLength(1)
      first.child.kill('SIGKILL')
      await first.exited
      await within(gone(helpers[0]!), 5_000, 'the orphaned helper to exit')
      const second = new Cli(['--port', String(port)])
      try {
        await second.waitFor(/serving .* at (postgresql:\/\/\S+)/)
        const c = await pgClient(port)
        expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }])
        await c.end()
      } finally {
        second.kill()
      }
    } finally {
      first.kill()
      await Promise.all([a, ...waiting].map((c) => endQuietly(c)))
    }
  }, 60_000)

  it('lets go of the port when the server stops: a new server listens on it at once, and serves', async () => {
    const port = await freePort()
    for (let round = 0; round < 2; round++) {
      const server = new PGliteServer({ db: database.db, port })
      await server.start()
      expect(await server.cancelReady).toBe(true)
      const c = await pgClient(port)
      expect((await c.query('select $1::int as round', [round])).rows).toEqual([{ round }])
      await c.end()
      await server.stop()
    }
  })
})

/** The processes whose parent is `pid` (Linux: from /proc). */
function childrenOf(pid: number): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // The fourth field of stat, after the command in parentheses.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(entry))
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** Resolves once process `pid` has exited. */
async function gone(pid: number): Promise<void> {
  for (;;) {
    try {
      process.kill(pid, 0)
    } catch {
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
