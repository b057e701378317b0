import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deferred, within } from '@pgwasm/test-support/async'
import { frame, startupPacket } from '@pgwasm/test-support/frontend'
import { findNativePostgres, startNativePostgres } from '@pgwasm/test-support/native-postgres'
import { HOST } from '@pgwasm/test-support/net'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { servedTarget, useServedDatabase, type SuiteTarget } from './helpers.js'

/*
 * Logging in, ending and being ended, as client libraries' own tests check
 * it: the same assertions against pgwasm-server and, when installed, native
 * PostgreSQL.
 */

const WAIT_MS = 10_000
const native = findNativePostgres()


function loginSuite(name: string, start: () => Promise<SuiteTarget>): void {
  describe(`logging in and ending (${name})`, () => {
    let target: SuiteTarget
    let admin: pg.Client

    beforeAll(async () => {
      target = await start()
      admin = new pg.Client({ host: HOST, port: target.port, user: 'postgres', database: 'postgres' })
      await admin.connect()
      await admin.query(`create role login_ok login; create role login_never nologin`)
    })

    afterAll(async () => {
      await admin?.end().catch(() => {})
      await target?.stop()
    })

    const connectAs = async (user: string): Promise<pg.Client> => {
      const client = new pg.Client({ host: HOST, port: target.port, user, database: 'postgres' })
      client.on('error', () => {})
      await client.connect()
      return client
    }

    it('refuses a role that does not exist with FATAL 28000', async () => {
      const err = (await connectAs('asldkfjsadlfkj').then(
        (c) => c.end(),
        (e: unknown) => e,
      )) as pg.DatabaseError
      expect(err).toBeInstanceOf(Error)
      expect({ code: err.code, severity: err.severity, message: err.message }).toEqual({
        code: '28000',
        severity: 'FATAL',
        message: 'role "asldkfjsadlfkj" does not exist',
      })
    })

    it('refuses a role without LOGIN with FATAL 28000', async () => {
      const err = (await connectAs('login_never').then(
        (c) => c.end(),
        (e: unknown) => e,
      )) as pg.DatabaseError
      expect({ code: err.code, message: err.message }).toEqual({ code: '28000', message: 'role "login_never" is not permitted to log in' })
    })

    it('lets a role with LOGIN in, and the database answers the others afterwards', async () => {
      const client = await connectAs('login_ok')
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }])
      await client.end()
      expect((await admin.query('select 2 as two')).rows).toEqual([{ two: 2 }])
    })

    it('closes without a word for a client that sends Terminate before its startup packet', async () => {
      const raw = new RawClient(target.port)
      await raw.connected
      // What node-postgres writes when end() follows connect() at once.
      raw.write(Buffer.concat([frame('X'), startupPacket()]))
      const sent = await within(raw.rest(), WAIT_MS, 'the server closing the connection')
      expect(sent.map((m) => m.type)).toEqual([])
    })

    it("lets node-postgres' connect() followed at once by end() close without a server error", async () => {
      const client = new pg.Client({ host: HOST, port: target.port, user: 'postgres', database: 'postgres' })
      const errors: unknown[] = []
      client.on('error', (e) => errors.push(e))
      const closed = new Promise((resolve) => client.once('end', resolve))
      client.connect().catch((e: unknown) => errors.push(e))
      client.end().catch((e: unknown) => errors.push(e))
      await within(closed, WAIT_MS, 'the connection closing')
      // Whatever the library reports of it, nothing came from the server.
      expect(errors.filter((e) => (e as pg.DatabaseError).code !== undefined)).toEqual([])
    })

    it('ends an idle client at once when another client, of another database, terminates it', async () => {
      const idle = await connectAs('postgres')
      const ended = new Promise<unknown>((resolve) => idle.once('error', resolve))
      const other = new pg.Client({ host: HOST, port: target.port, user: 'postgres', database: 'template1' })
      await other.connect()
      try {
        const { rows } = await other.query<{ t: boolean }>('select pg_terminate_backend($1) as t', [(idle as unknown as { processID: number }).processID])
        expect(rows).toEqual([{ t: true }])
        // The idle client sends nothing: the server tells it.
        const err = (await within(ended, WAIT_MS, 'the idle client to hear of its end')) as pg.DatabaseError
        expect({ code: err.code, message: err.message }).toEqual({ code: '57P01', message: 'terminating connection due to administrator command' })
      } finally {
        await other.end()
      }
    })

    it('ends at once a client that holds a transaction open when another client terminates it', async () => {
      const holder = await connectAs('postgres')
      const ended = new Promise<unknown>((resolve) => holder.once('error', resolve))
      await holder.query('begin')
      await holder.query('select 1')
      const other = await connectAs('postgres')
      const pid = (holder as unknown as { processID: number }).processID
      const { rows } = await within(other.query<{ t: boolean }>(`select pg_terminate_backend(${pid}) as t`), 3000, 'the termination of the holder')
      expect(rows).toEqual([{ t: true }])
      const err = (await within(ended, WAIT_MS, 'the holder to hear of its end')) as pg.DatabaseError
      expect(err.code).toBe('57P01')
      await other.end()
    })

    it("lists each client in pg_stat_activity, and a pool's idle clients end when terminated by pid from it", async () => {
      const pool = new pg.Pool({ host: HOST, port: target.port, user: 'postgres', database: 'postgres', max: 3, application_name: 'activity-pool' })
      const poolErrors: unknown[] = []
      pool.on('error', (e) => poolErrors.push(e))
      const watcher = await connectAs('postgres')
      try {
        const held = await Promise.all([pool.connect(), pool.connect(), pool.connect()])
        await Promise.all(held.map((c, i) => c.query(`select ${i} as marker`)))
        for (const c of held) c.release()
        const { rows } = await watcher.query<{ pid: number; usename: string; state: string; query: string; client_addr: string; backend_type: string; datname: string }>(
          `select pid, usename, state, query, client_addr::text as client_addr, backend_type, datname from pg_stat_activity where application_name = 'activity-pool' order by pid`,
        )
        expect(rows).toHaveLength(3)
        for (const row of rows) {
          expect(row).toMatchObject({ usename: 'postgres', state: 'idle', backend_type: 'client backend', datname: 'postgres' })
          expect(row.query).toMatch(/^select \d as marker$/)
          expect(row.client_addr).toMatch(/^127\.0\.0\.1(\/32)?$/)
        }
        // The watcher sees itself running its own query, under the pid its BackendKeyData gave it.
        const self = await watcher.query<{ state: string; query: string }>(`select state, query from pg_stat_activity where pid = pg_backend_pid()`)
        expect(self.rows).toEqual([{ state: 'active', query: 'select state, query from pg_stat_activity where pid = pg_backend_pid()' }])
        const ended = await watcher.query<{ t: boolean }>(
          `select pg_terminate_backend(pid) as t from pg_stat_activity where state = 'idle' and application_name = 'activity-pool'`,
        )
        expect(ended.rows).toEqual([{ t: true }, { t: true }, { t: true }])
        // The pool hears of each end at once and drops the connection.
        await within(
          (async () => {
            while (pool.totalCount > 0 || poolErrors.length < 3) await new Promise((resolve) => setTimeout(resolve, 20))
          })(),
          WAIT_MS,
          'the pool to drop its terminated clients',
        )
        expect(poolErrors.map((e) => (e as pg.DatabaseError).code)).toEqual(['57P01', '57P01', '57P01'])
      } finally {
        await pool.end().catch(() => {})
      }
    })

    it('fails the statement of a client that terminates itself with FATAL 57P01, and the query queued behind it with no server error', async () => {
      const client = await connectAs('postgres')
      const own = client.query('select pg_terminate_backend(pg_backend_pid())').then(
        () => undefined,
        (e: unknown) => e as pg.DatabaseError,
      )
      const queued = client.query('select 1').then(
        () => undefined,
        (e: unknown) => e as pg.DatabaseError,
      )
      const ownError = await within(own, WAIT_MS, 'the terminating statement to fail')
      expect({ code: ownError?.code, severity: ownError?.severity }).toEqual({ code: '57P01', severity: 'FATAL' })
      const queuedError = await within(queued, WAIT_MS, 'the queued query to fail')
      expect(queuedError).toBeInstanceOf(Error)
      expect(queuedError?.code).toBeUndefined()
    })
  })
}

loginSuite('pgwasm', () => servedTarget())

if (native) loginSuite('native PostgreSQL', () => startNativePostgres(native))
else describe.skip('logging in and ending (native PostgreSQL: initdb or pg_ctl not installed)', () => {})

describe('logging in while the engine is held (pgwasm)', () => {
  const served = useServedDatabase()

  it("lets a client in while an in-process caller's transaction holds the engine; its query runs once that ends", async () => {
    const release = deferred()
    const inside = deferred()
    const held = served.db.transaction(async (tx) => {
      await tx.query('select 1')
      inside.resolve()
      await release.promise
    })
    await inside.promise
    const client = await within(served.connect(), WAIT_MS, 'the login while the engine is held')
    let answered = false
    const query = client.query('select 2 as two').then((r) => {
      answered = true
      return r.rows
    })
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(answered).toBe(false)
    release.resolve()
    await held
    expect(await within(query, WAIT_MS, 'the query after the transaction')).toEqual([{ two: 2 }])
  })
})
