import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { Waiters, deferred, within } from '@pgwasm/test-support/async'
import { errorFields } from '@pgwasm/test-support/backend'
import { cstr, frame, startupPacket } from '@pgwasm/test-support/frontend'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { createPgStream } from '../src/index.js'
import { endQuietly, pgClient, serve, useServedDatabase, type TestClient } from './helpers.js'

/** Bound for waiting on something the server must do by itself. */
const WAIT_MS = 10_000

interface Notifications {
  readonly got: { channel: string; payload: string }[]
  waitFor(channel: string): Promise<string>
}

/** Records a client's notifications; `waitFor` resolves once one arrived on `channel`. */
function recordNotifications(client: pg.Client): Notifications {
  const got: { channel: string; payload: string }[] = []
  const arrived = new Waiters()
  client.on('notification', (n) => {
    got.push({ channel: n.channel, payload: n.payload ?? '' })
    arrived.wake()
  })
  const waitFor = async (channel: string): Promise<string> => {
    const find = (): string | undefined => got.find((n) => n.channel === channel)?.payload
    const wait = (async () => {
      while (find() === undefined) await arrived.next()
      return find()!
    })()
    return within(wait, WAIT_MS, `a notification on ${channel}`)
  }
  return { got, waitFor }
}

/** Tracks whether a promise has settled yet. */
function track<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let done = false
  const p = promise.finally(() => (done = true))
  return { promise: p, settled: () => done }
}

describe('sessions sharing one engine', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table mx (id int primary key, who text)'))
  const connect = (config?: pg.ClientConfig): Promise<TestClient> => served.connect(config)

  it('gives two clients that prepare the same statement name their own statements', async () => {
    const a = await connect()
    const b = await connect()
    const fromA = await a.query({ name: 's1', text: "select 'A:' || $1::text as v", values: ['x'] })
    const fromB = await b.query({ name: 's1', text: "select 'B:' || ($1::int * 10)::text as v", values: [4] })
    const againA = await a.query({ name: 's1', text: "select 'A:' || $1::text as v", values: ['y'] })
    const againB = await b.query({ name: 's1', text: "select 'B:' || ($1::int * 10)::text as v", values: [5] })
    expect([fromA, fromB, againA, againB].map((r) => r.rows[0].v)).toEqual(['A:x', 'B:40', 'A:y', 'B:50'])
  })

  it("makes a client wait for another client's transaction and never shows it the uncommitted row", async () => {
    const a = await connect()
    const b = await connect()
    await a.query('begin')
    await a.query("insert into mx values (1, 'uncommitted')")
    const fromB = track(b.query<{ n: number }>('select count(*)::int as n from mx where id = 1'))
    const seenByA = await a.query('select count(*)::int as n from mx where id = 1')
    expect(seenByA.rows).toEqual([{ n: 1 }])
    expect(fromB.settled()).toBe(false)
    await a.query('rollback')
    expect((await fromB.promise).rows).toEqual([{ n: 0 }])
    expect((await b.query('select count(*)::int as n from mx where id = 1')).rows).toEqual([{ n: 0 }])
  })

  it('rolls back the transaction of a client killed mid-transaction and lets the others proceed', async () => {
    const a = await connect()
    const b = await connect()
    await a.query('begin')
    await a.query("insert into mx values (2, 'killed')")
    const fromB = b.query<{ n: number }>('select count(*)::int as n from mx where id = 2')
    a.connection.stream.destroy()
    expect((await within(fromB, WAIT_MS, "B's query after A was killed")).rows).toEqual([{ n: 0 }])
    const inProcess = await served.db.query<{ n: number; xid: string | null }>(
      'select count(*)::int as n, txid_current_if_assigned()::text as xid from mx where id = 2',
    )
    expect(inProcess.rows).toEqual([{ n: 0, xid: null }])
    await served.db.query("insert into mx values (3, 'in-process')")
    expect((await b.query('select who from mx where id = 3')).rows).toEqual([{ who: 'in-process' }])
  })

  it('disconnects a client that sends Parse and Bind but never Sync once syncTimeoutMs passes, and the others proceed', async () => {
    const strict = await serve(served.db, { syncTimeoutMs: 300 })
    const raw = new RawClient(strict.port)
    const b = await connect()
    try {
      await raw.handshake()
      raw.write(
        Buffer.concat([
          frame('P', Buffer.concat([cstr('held', 'select 1'), Buffer.from([0, 0])])),
          // Bind: portal '', statement 'held', no parameter formats, no parameters, no result formats.
          frame('B', Buffer.concat([cstr('', 'held'), Buffer.from([0, 0, 0, 0, 0, 0])])),
          frame('H'),
        ]),
      )
      expect((await raw.next())?.type).toBe('1')
      expect((await raw.next())?.type).toBe('2')
      // The raw client holds the engine now: B's query runs only after its cleanup closed `held`.
      const fromB = b.query<{ n: number }>("select count(*)::int as n from pg_prepared_statements where name like '%held'")
      const rest = await within(raw.rest(), WAIT_MS, 'the server to end the silent client')
      expect(rest.map((m) => m.type)).toEqual(['E'])
      const fields = errorFields(rest[0]!.body)
      expect(fields.S).toBe('FATAL')
      expect(fields.C).toBe('08P01')
      expect(raw.isClosed).toBe(true)
      expect((await within(fromB, WAIT_MS, "B's query")).rows).toEqual([{ n: 0 }])
    } finally {
      raw.destroy()
      await strict.server.stop()
    }
  })

  it('keeps a SET of a custom setting (a name with a dot) visible to the other clients (documented limit)', async () => {
    const a = await connect()
    const b = await connect()
    await a.query("set pgwasm_test.flag = 'from-a'")
    try {
      expect((await b.query("select current_setting('pgwasm_test.flag') as v")).rows).toEqual([{ v: 'from-a' }])
    } finally {
      await a.query('reset pgwasm_test.flag')
    }
  })

  it('keeps a SET LOCAL inside the transaction that made it', async () => {
    const a = await connect()
    const b = await connect()
    await a.query('begin')
    await a.query("set local pgwasm_test.local = 'a-only'")
    const fromB = track(b.query("select coalesce(current_setting('pgwasm_test.local', true), '') as v"))
    expect((await a.query("select current_setting('pgwasm_test.local') as v")).rows).toEqual([{ v: 'a-only' }])
    expect(fromB.settled()).toBe(false)
    await a.query('commit')
    expect((await fromB.promise).rows).toEqual([{ v: '' }])
  })
})

describe('LISTEN / NOTIFY routing', () => {
  const served = useServedDatabase()
  /** A client whose notifications are recorded in `at`. */
  const connect = async (): Promise<TestClient & { at: Notifications }> => {
    const client = await served.connect()
    return Object.assign(client, { at: recordNotifications(client) })
  }

  it('delivers a NOTIFY only to the clients that LISTEN on its channel', async () => {
    const a = await connect()
    const b = await connect()
    const c = await connect()
    await a.query('listen ch')
    await b.query('listen sentinel_b')
    await c.query("notify ch, 'for-a'")
    await c.query("notify sentinel_b, 'after-ch'")
    expect(await a.at.waitFor('ch')).toBe('for-a')
    // B gets its sentinel, sent after ch: had ch reached B it would be in front of it.
    expect(await b.at.waitFor('sentinel_b')).toBe('after-ch')
    expect(b.at.got).toEqual([{ channel: 'sentinel_b', payload: 'after-ch' }])
    expect(c.at.got).toEqual([])
  })

  it('delivers a NOTIFY to the listener that sent it, like Postgres', async () => {
    const a = await connect()
    await a.query('listen self_ch')
    await a.query("notify self_ch, 'to-myself'")
    expect(a.at.got).toEqual([{ channel: 'self_ch', payload: 'to-myself' }])
  })

  it("gives a notification the sender's process id from its BackendKeyData, its own or another client's", async () => {
    const a = await connect()
    const b = await connect()
    const pids: number[] = []
    const both = deferred()
    a.on('notification', (n) => {
      pids.push(n.processId)
      if (pids.length === 2) both.resolve()
    })
    await a.query('listen pid_ch')
    await a.query("notify pid_ch, 'from-a'")
    await b.query("notify pid_ch, 'from-b'")
    await within(both.promise, WAIT_MS, 'two notifications')
    const processIds = (c: pg.Client): number => (c as unknown as { processID: number }).processID
    expect(processIds(a)).not.toBe(processIds(b))
    expect(pids).toEqual([processIds(a), processIds(b)])
  })

  it('keeps delivering to one listener after the other listener of the channel UNLISTENs', async () => {
    const a = await connect()
    const b = await connect()
    const c = await connect()
    await a.query('listen shared_ch; listen sentinel_a')
    await b.query('listen shared_ch')
    await a.query('unlisten shared_ch')
    await c.query("notify shared_ch, 'still-b'")
    await c.query("notify sentinel_a, 'after-shared'")
    expect(await b.at.waitFor('shared_ch')).toBe('still-b')
    expect(await a.at.waitFor('sentinel_a')).toBe('after-shared')
    expect(a.at.got).toEqual([{ channel: 'sentinel_a', payload: 'after-shared' }])
  })

  it('keeps delivering to other listeners after one client runs UNLISTEN *', async () => {
    const a = await connect()
    const b = await connect()
    const c = await connect()
    await a.query('listen star_ch')
    await b.query('listen star_ch')
    await a.query('unlisten *')
    await c.query("notify star_ch, 'after-star'")
    expect(await b.at.waitFor('star_ch')).toBe('after-star')
  })

  it("delivers a notification to a listener whose own query waits for another client's transaction", async () => {
    const a = await connect()
    const b = await connect()
    await a.query('listen busy_ch')
    // A block with a transaction id keeps the engine (a read-only one would let it go: transaction-parking.ts).
    await b.query('begin; select pg_current_xact_id()')
    const fromA = track(a.query("select 'a-result' as v"))
    await b.query("notify busy_ch, 'during'")
    expect(fromA.settled()).toBe(false)
    await b.query('commit')
    expect(await a.at.waitFor('busy_ch')).toBe('during')
    expect((await fromA.promise).rows).toEqual([{ v: 'a-result' }])
  })

  it('quotes channel names: a LISTEN on "Mixed Case" gets only that channel', async () => {
    const a = await connect()
    const c = await connect()
    await a.query('listen "Mixed Case"')
    await c.query(`notify "Mixed Case", 'quoted'`)
    expect(await a.at.waitFor('Mixed Case')).toBe('quoted')
  })
})

describe('disconnect cleanup', () => {
  const served = useServedDatabase()

  it("removes a disconnected client's LISTENs and prepared statements from the engine", async () => {
    const a = await pgClient(served.port)
    const pid = (a as unknown as { processID: number }).processID
    await a.query('listen gone_ch')
    await a.query({ name: 'gone_stmt', text: 'select $1::int as v', values: [1] })
    const statementsOfA = "select count(*)::int as n from pg_prepared_statements where name like 'c' || $1::text || '\\_%'"
    expect((await served.db.query(statementsOfA, [pid])).rows).toEqual([{ n: 1 }])
    expect((await served.db.query('select count(*)::int as n from pg_listening_channels()')).rows).toEqual([{ n: 1 }])
    const gone = deferred()
    served.server.on('disconnect', (id: number) => {
      if (id === pid) gone.resolve()
    })
    await a.end()
    await within(gone.promise, WAIT_MS, 'the disconnect event')
    expect((await served.db.query('select count(*)::int as n from pg_listening_channels()')).rows).toEqual([{ n: 0 }])
    expect((await served.db.query(statementsOfA, [pid])).rows).toEqual([{ n: 0 }])
  })

  it('rolls back the transaction of a client that sends Terminate mid-transaction', async () => {
    await served.db.exec('create table if not exists cleanup_t (id int)')
    const a = await pgClient(served.port)
    await a.query('begin')
    await a.query('insert into cleanup_t values (1)')
    await a.end()
    const { rows } = await served.db.query('select count(*)::int as n, txid_current_if_assigned()::text as xid from cleanup_t')
    expect(rows).toEqual([{ n: 0, xid: null }])
  })

  it('rolls back open transactions when the server stops', async () => {
    await served.db.exec('create table if not exists stop_t (id int)')
    const other = await serve(served.db)
    const a = await pgClient(other.port)
    try {
      await a.query('begin')
      await a.query('insert into stop_t values (1)')
      await within(other.server.stop(), WAIT_MS, 'server.stop()')
    } finally {
      await endQuietly(a)
    }
    const { rows } = await served.db.query('select count(*)::int as n, txid_current_if_assigned()::text as xid from stop_t')
    expect(rows).toEqual([{ n: 0, xid: null }])
  })
})

describe('maxConnections', () => {
  const served = useServedDatabase({ maxConnections: 2 })

  it('refuses a third client with 53300 and leaves the two connected ones working', async () => {
    const first = await served.connect()
    const second = await served.connect()
    try {
      const third = new pg.Client({ host: '127.0.0.1', port: served.port, user: 'postgres', database: 'postgres' })
      third.on('error', () => {})
      await expect(third.connect()).rejects.toMatchObject({ code: '53300' })
      expect((await first.query('select 1 as n')).rows).toEqual([{ n: 1 }])
      expect((await second.query('select 2 as n')).rows).toEqual([{ n: 2 }])
    } finally {
      // Both slots free again before the next test counts on them.
      const pid = (c: pg.Client): number => (c as unknown as { processID: number }).processID
      const pending = new Set([pid(first), pid(second)])
      const bothGone = deferred()
      const onDisconnect = (pid: number) => pending.delete(pid) && pending.size === 0 && bothGone.resolve()
      served.server.on('disconnect', onDisconnect)
      await Promise.all([endQuietly(first), endQuietly(second)])
      await within(bothGone.promise, WAIT_MS, 'both disconnect events')
      served.server.off('disconnect', onDisconnect)
    }
  })

  it('accepts a new client once one of the two has disconnected', async () => {
    const staying = await served.connect()
    const leaving = await served.connect()
    const gone = deferred()
    served.server.once('disconnect', () => gone.resolve())
    await leaving.end()
    await within(gone.promise, WAIT_MS, 'the disconnect event')
    const next = await served.connect()
    try {
      expect((await next.query('select 3 as n')).rows).toEqual([{ n: 3 }])
    } finally {
      await Promise.all([endQuietly(staying), endQuietly(next)])
    }
  })

  it('stops promptly after having refused a client and seen every client leave', async () => {
    const single = await serve(served.db, { maxConnections: 1 })
    const admitted = await pgClient(single.port)
    const refused = new RawClient(single.port)
    try {
      await refused.connected
      refused.write(startupPacket())
      const reply = await within(refused.rest(), WAIT_MS, 'the refusal')
      expect(reply.map((m) => errorFields(m.body).C)).toEqual(['53300'])
    } finally {
      refused.destroy()
      await endQuietly(admitted)
    }
    await refused.closed
    await within(single.server.stop(), WAIT_MS, 'server.stop() after a refused client left')
  })
})

describe('in-process API and bridge', () => {
  const served = useServedDatabase()

  it('serves a pg.Client through createPgStream with no socket', async () => {
    const client = new pg.Client({ stream: () => createPgStream(served.db) })
    await client.connect()
    try {
      const { rows } = await client.query('select $1::int + 1 as n, current_database() as d', [41])
      expect(rows).toEqual([{ n: 42, d: 'postgres' }])
    } finally {
      await client.end()
    }
  })

  it('runs 20 concurrent queries through a pg.Pool of 4 bridge streams', async () => {
    const pool = new pg.Pool({ stream: () => createPgStream(served.db), max: 4 })
    try {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => pool.query('select $1::int * 3 as v', [i]).then((r) => r.rows[0].v)),
      )
      expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i * 3))
      expect(pool.totalCount).toBeGreaterThan(1)
    } finally {
      await pool.end()
    }
  })

  it('lets in-process queries in between the batches of socket clients that keep the engine busy', async () => {
    const busy = await Promise.all([served.connect(), served.connect()])
    let stop = false
    const loops = busy.map(async (c) => {
      while (!stop) await c.query('select $1::int as n', [1])
    })
    try {
      for (let i = 0; i < 5; i++) {
        expect((await within(served.db.query('select 2 as n'), WAIT_MS, 'an in-process query')).rows).toEqual([{ n: 2 }])
      }
    } finally {
      stop = true
      await Promise.all(loops)
    }
  })

  it("makes a bridge client wait for a TCP client's transaction", async () => {
    await served.db.exec('create table bridged (id int)')
    const tcp = await served.connect()
    const bridge = new pg.Client({ stream: () => createPgStream(served.db) })
    await bridge.connect()
    try {
      await tcp.query('begin')
      await tcp.query('insert into bridged values (1)')
      const fromBridge = track(bridge.query('select count(*)::int as n from bridged'))
      await tcp.query('select 1')
      expect(fromBridge.settled()).toBe(false)
      await tcp.query('rollback')
      expect((await fromBridge.promise).rows).toEqual([{ n: 0 }])
    } finally {
      await bridge.end()
    }
  })

  it('delivers a NOTIFY sent by a pg client to a served.db.listen callback', async () => {
    const payload = deferred<string>()
    const unlisten = await served.db.listen('inproc_ch', (p) => payload.resolve(p))
    try {
      const client = await served.connect()
      await client.query("notify inproc_ch, 'from-socket'")
      expect(await within(payload.promise, WAIT_MS, 'the served.db.listen callback')).toBe('from-socket')
    } finally {
      await unlisten()
    }
  })

  it('does not hand a NOTIFY to the pg client that sent it when only served.db.listen listens', async () => {
    const unlisten = await served.db.listen('inproc_only', () => {})
    try {
      const client = await served.connect()
      const atClient = recordNotifications(client)
      // Notifications come before the query's ReadyForQuery: any would be recorded once it resolves.
      await client.query("notify inproc_only, 'not-for-the-sender'")
      expect(atClient.got).toEqual([])
    } finally {
      await unlisten()
    }
  })

  it('keeps a served.db.listen subscription working after a pg client runs UNLISTEN *', async () => {
    const payloads: string[] = []
    const unlisten = await served.db.listen('inproc_keep', (p) => payloads.push(p))
    try {
      const client = await served.connect()
      await client.query('unlisten *')
      await client.query("notify inproc_keep, 'second'")
      // served.db.query runs after the NOTIFY's exec: a listener still subscribed has been called by then.
      await served.db.query('select 1')
      expect(payloads).toEqual(['second'])
    } finally {
      await unlisten()
    }
  })

  it('delivers a NOTIFY sent through served.db.query to a pg client that LISTENs', async () => {
    const client = await served.connect()
    const at = recordNotifications(client)
    await client.query('listen from_inproc')
    await served.db.query("notify from_inproc, 'from-db-query'")
    expect(await at.waitFor('from_inproc')).toBe('from-db-query')
  })
})

describe('database names', () => {
  const served = useServedDatabase({ createDatabaseOnConnect: true })
  const connect = (database: string): Promise<TestClient> => served.connect({ database })

  it("gives another database name its own instance: tables don't cross", async () => {
    const main = await connect('postgres')
    const other = await connect('other')
    await other.query('create table only_in_other (id int)')
    await main.query('create table only_in_main (id int)')
    const tables = "select coalesce(string_agg(tablename, ',' order by tablename), '') as t from pg_tables where tablename like 'only_in_%'"
    expect((await other.query(tables)).rows).toEqual([{ t: 'only_in_other' }])
    expect((await main.query(tables)).rows).toEqual([{ t: 'only_in_main' }])
    expect((await served.db.query(tables)).rows).toEqual([{ t: 'only_in_main' }])
  })

  it('lets a client connect to a database made with CREATE DATABASE', async () => {
    const main = await connect('postgres')
    await main.query('create database shadow')
    const shadow = await connect('shadow')
    await shadow.query('create table in_shadow (id int)')
    await shadow.query('insert into in_shadow values (7)')
    expect((await shadow.query('select id from in_shadow')).rows).toEqual([{ id: 7 }])
  })

  it('closes the instance of a database on DROP DATABASE: with createDatabaseOnConnect a new connection finds it empty', async () => {
    const main = await connect('postgres')
    await main.query('drop database if exists shadow')
    const again = await connect('shadow')
    const { rows } = await again.query("select count(*)::int as n from pg_tables where tablename = 'in_shadow'")
    expect(rows).toEqual([{ n: 0 }])
  })
})

describe('database names without createDatabaseOnConnect', () => {
  const served = useServedDatabase()
  const connect = (database: string): Promise<TestClient> => served.connect({ database })

  it('lets a client connect to a database made with CREATE DATABASE, and refuses it with 3D000 after DROP DATABASE', async () => {
    const main = await connect('postgres')
    await main.query('create database made_here')
    const made = await connect('made_here')
    await made.query('create table in_made (id int)')
    expect((await made.query('select count(*)::int as n from in_made')).rows).toEqual([{ n: 0 }])
    await made.end()
    await main.query('drop database made_here')
    await expect(connect('made_here')).rejects.toMatchObject({ code: '3D000', message: 'database "made_here" does not exist' })
  })
})
