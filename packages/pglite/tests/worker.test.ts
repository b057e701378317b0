import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { MessageChannel, Worker } from 'node:worker_threads'
import { deferred } from '@pgwasm/test-support/async'
import { queryFrame as queryMessage } from '@pgwasm/test-support/frontend'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { bundleFixtures } from './fixtures/bundle.js'
import { afterAll, beforeAll, describe, expect, expectTypeOf, it, vi } from 'vitest'
import { rejection } from './helpers.js'
import { ClosedError, DatabaseError, DataDirLockedError, EngineError, PGlite, ProtocolError, type Results } from '../src/index.js'
import { PGliteWorker, worker, type PGliteWorkerOptions } from '../src/worker.js'
import { webShaped } from './fixtures/worker-web-port.mjs'

const here = dirname(fileURLToPath(import.meta.url))
// Inside the package, so the bundle resolves @electric-sql/pglite (the engine
// files) like src does; a directory of its own, since other files clean theirs.
mkdirSync(join(here, '.cache'), { recursive: true })
const bundleDir = mkdtempSync(join(here, '.cache', 'worker-build-'))
const hostScript = join(bundleDir, 'worker-host.mjs')
const threads: Worker[] = []

/** A worker_threads worker running the fixture host, its PGliteWorker, and everything it printed. */
interface Started {
  pg: PGliteWorker
  thread: Worker
  output(): string
  exited: Promise<number>
}

function start(mode?: string, options?: PGliteWorkerOptions): Started {
  // stdout/stderr piped to us rather than to the process: the console test reads them.
  const thread = new Worker(hostScript, { workerData: { mode }, stdout: true, stderr: true })
  threads.push(thread)
  let output = ''
  thread.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  thread.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number>((resolve) => thread.once('exit', resolve))
  return { pg: new PGliteWorker(thread, options), thread, output: () => output, exited }
}

const SCHEMA = `
  create table w_items (id int primary key, name text constraint w_items_name_key unique, price numeric, tags text[]);
  insert into w_items values (1, 'one', 1.5, '{a,b}'), (2, 'two', 2.25, '{}'), (3, 'three', null, null);
  create table w_tx (id int primary key);
`

let shared: Started
let pg: PGliteWorker
let direct: PGlite

beforeAll(async () => {
  await bundleFixtures(join(here, 'fixtures'), ['worker-host'], bundleDir)
  shared = start()
  pg = shared.pg
  ;[direct] = await Promise.all([PGlite.create(), pg.waitReady])
  await Promise.all([direct.exec(SCHEMA), pg.exec(SCHEMA)])
})

afterAll(async () => {
  await pg?.close()
  await direct?.close()
  await Promise.all(threads.map((t) => t.terminate()))
  rmSync(bundleDir, { recursive: true, force: true })
  const cache = join(here, '.cache')
  if (readdirSync(cache).length === 0) rmSync(cache, { recursive: true })
})

describe('PGliteWorker results', () => {
  it('returns the same query, exec and sql results as PGlite called directly', async () => {
    const run = async (db: PGlite | PGliteWorker): Promise<unknown[]> => [
      await db.query('select * from w_items where id >= $1 order by id', [2]),
      await db.query('select id, name from w_items order by id', [], { rowMode: 'array' }),
      await db.exec('select count(*)::int as n from w_items; update w_items set price = price where id = 1'),
      await db.sql`select name from w_items where id = ${1}`,
      await db.query('select 1 where false'),
    ]
    expect(await run(pg)).toEqual(await run(direct))
  })

  it('keeps Date, bigint, bytea, json and nested arrays through structured clone', async () => {
    const when = new Date('2024-02-29T12:34:56.789Z')
    const sql = `select $1::timestamptz as ts, 9007199254740993::int8 as big, '\\x0102ff'::bytea as bytes,
      $2::bytea as param_bytes, '{"a":[1,{"b":null}],"s":"x"}'::jsonb as doc, array[array[1,2],array[3,4]] as grid,
      array['\\x01'::bytea, null] as byteas, '2024-01-02'::date as day`
    const params = [when, new Uint8Array([9, 8, 7])]
    const viaWorker = await pg.query<Record<string, unknown>>(sql, params)
    expect(viaWorker).toEqual(await direct.query(sql, params))
    const row = viaWorker.rows[0]!
    expect(row.ts).toBeInstanceOf(Date)
    expect((row.ts as Date).getTime()).toBe(when.getTime())
    expect(row.big).toBe(9007199254740993n)
    expect(row.bytes).toBeInstanceOf(Uint8Array)
    expect([...(row.bytes as Uint8Array)]).toEqual([1, 2, 255])
    expect([...(row.param_bytes as Uint8Array)]).toEqual([9, 8, 7])
    expect(row.doc).toEqual({ a: [1, { b: null }], s: 'x' })
    expect(row.grid).toEqual([[1, 2], [3, 4]])
    expect(row.byteas).toEqual([new Uint8Array([1]), null])
    expect(row.day).toBeInstanceOf(Date)
  })

  it('returns bytea columns of array-mode rows and repeated column names intact', async () => {
    const sql = `select '\\x0a'::bytea as b, '\\x0b'::bytea as b, '\\x0c'::bytea as c`
    expect(await pg.query(sql)).toEqual(await direct.query(sql))
    expect(await pg.query(sql, [], { rowMode: 'array' })).toEqual(await direct.query(sql, [], { rowMode: 'array' }))
  })

  it('answers execProtocolRaw with the same bytes as PGlite, also for a view into a larger buffer', async () => {
    const message = queryMessage('select 42 as answer')
    const padded = new Uint8Array(message.length + 8)
    padded.set(message, 4)
    const expected = await direct.execProtocolRaw(message)
    expect(await pg.execProtocolRaw(message)).toEqual(expected)
    expect(await pg.execProtocolRaw(padded.subarray(4, 4 + message.length))).toEqual(expected)
    // The caller's buffer was neither transferred nor changed.
    expect(padded.byteLength).toBe(message.length + 8)
    let streamed: Uint8Array | undefined
    await pg.execProtocolRawStream(message, { onRawData: (bytes) => (streamed = bytes) })
    expect(streamed).toEqual(expected)
  })

  it('describes a statement with the same types as PGlite', async () => {
    const sql = 'select id, name, tags from w_items where id = $1 and price > $2'
    const [viaWorker, viaDirect] = await Promise.all([pg.describeQuery(sql), direct.describeQuery(sql)])
    const shape = (d: typeof viaWorker): unknown => ({
      params: d.queryParams.map((p) => [p.dataTypeID, typeof p.serializer]),
      fields: d.resultFields.map((f) => [f.name, f.dataTypeID, typeof f.parser]),
    })
    expect(shape(viaWorker)).toEqual(shape(viaDirect))
  })

  it("moves blobs both ways for COPY ... '/dev/blob'", async () => {
    const { blob } = await pg.query(`copy (select id, name from w_items order by id) to '/dev/blob' with (format csv)`)
    expect(await blob!.text()).toBe('1,one\n2,two\n3,three\n')
    await pg.exec('create table w_copy (id int, name text)')
    await pg.query(`copy w_copy from '/dev/blob' with (format csv)`, [], { blob: new Blob(['7,seven\n']) })
    expect((await pg.query('select * from w_copy')).rows).toEqual([{ id: 7, name: 'seven' }])
  })

  it('stops a statement that computes in the worker when the page aborts its signal (57014), and one whose signal was aborted before the call', async () => {
    await pg.exec('create table w_runaway as select g from generate_series(1, 1000) g')
    for (const [sql, call] of [
      ['select count(*) from w_runaway a, w_runaway b, w_runaway c', 'query'],
      ['do $$ begin loop end loop; end $$', 'exec'],
    ] as const) {
      const controller = new AbortController()
      const running = call === 'query' ? pg.query(sql, [], { signal: controller.signal }) : pg.exec(sql, { signal: controller.signal })
      // The page is free while the worker's engine computes: this timer fires.
      setTimeout(() => controller.abort(), 200)
      expect(await rejection(running), sql).toMatchObject({ code: '57014', message: 'canceling statement due to user request' })
      expect((await pg.query('select count(*)::int as n from w_runaway')).rows).toEqual([{ n: 1000 }])
    }
    const before = new AbortController()
    before.abort()
    expect(await rejection(pg.query('insert into w_runaway values (0)', [], { signal: before.signal }))).toMatchObject({ code: '57014' })
    expect((await pg.query('select count(*)::int as n from w_runaway')).rows).toEqual([{ n: 1000 }])
    await pg.exec('drop table w_runaway')
  })

  it('hands the notices of a statement to its onNotice', async () => {
    const notices: string[] = []
    await pg.exec(`do $$ begin raise notice 'first %', 1; raise notice 'second'; end $$`, {
      onNotice: (notice) => notices.push(notice.message),
    })
    expect(notices).toEqual(['first 1', 'second'])
  })

  it('rejects a per-query parsers option with a TypeError that names it', async () => {
    const error = await rejection(pg.query('select 1', [], { parsers: { 23: (v) => Number(v) } }))
    expect(error).toBeInstanceOf(TypeError)
    expect((error as Error).message).toContain('`parsers`')
  })

  it('rejects parameters that structured clone refuses with a TypeError and stays usable', async () => {
    const error = await rejection(pg.query('select $1::text', [() => 1]))
    expect(error).toBeInstanceOf(TypeError)
    expect((error as Error).message).toContain('`query`')
    expect((await pg.query('select 1 as n')).rows).toEqual([{ n: 1 }])
  })

  it('rejects function-valued options at construction with a TypeError', () => {
    const thread = { postMessage: () => {}, on: () => {}, off: () => {} }
    expect(() => new PGliteWorker(thread, { parsers: {} } as PGliteWorkerOptions)).toThrow(TypeError)
  })

  it('types query results like PGlite', () => {
    expectTypeOf(pg.query<{ n: number }>).returns.resolves.toEqualTypeOf<Results<{ n: number }>>()
    expectTypeOf(pg.exec).returns.resolves.toEqualTypeOf<Results[]>()
  })
})

describe('PGliteWorker errors', () => {
  it('rethrows a unique violation as a DatabaseError with every field of the direct error', async () => {
    const sql = 'insert into w_items (id, name) values ($1, $2)'
    const viaWorker = await rejection(pg.query(sql, [10, 'one']))
    const viaDirect = await rejection(direct.query(sql, [10, 'one']))
    expect(viaWorker).toBeInstanceOf(DatabaseError)
    expect(viaWorker).toMatchObject({ code: '23505', constraint: 'w_items_name_key', table: 'w_items', schema: 'public', severity: 'ERROR' })
    expect({ ...(viaWorker as object) }).toEqual({ ...(viaDirect as object) })
    expect((viaWorker as Error).message).toBe((viaDirect as Error).message)
    expect((viaWorker as Error).stack).toContain('DatabaseError')
  })

  it('rethrows a malformed frame as a ProtocolError with code BAD_FRAME', async () => {
    const error = await rejection(pg.execProtocolRaw(new Uint8Array([0x51, 0, 0, 0, 3])))
    expect(error).toBeInstanceOf(ProtocolError)
    expect((error as ProtocolError).code).toBe('BAD_FRAME')
  })

  it('rejects waitReady with the class and message init threw, then rejects calls with ClosedError', async () => {
    const { pg: failing, exited } = start('fail-init')
    const error = await rejection(failing.waitReady)
    expect(error).toBeInstanceOf(RangeError)
    expect((error as Error).message).toBe('`init` refused `meta.size` 0')
    expect(failing.closed).toBe(true)
    expect(await rejection(failing.query('select 1'))).toBeInstanceOf(ClosedError)
    await failing.close()
    // The host stopped listening, so the thread ends by itself.
    expect(await exited).toBe(0)
  })
})

describe('PGliteWorker transactions', () => {
  it('commits when the callback returns and resolves with its value', async () => {
    const value = await pg.transaction(async (tx) => {
      await tx.query('insert into w_tx values ($1)', [1])
      await tx.sql`insert into w_tx values (${2})`
      await tx.exec('insert into w_tx values (3)')
      return (await tx.query<{ n: number }>('select count(*)::int as n from w_tx where id <= 3')).rows[0]!.n
    })
    expect(value).toBe(3)
    expect((await pg.query('select count(*)::int as n from w_tx where id <= 3')).rows).toEqual([{ n: 3 }])
  })

  it('rolls back on tx.rollback() and still resolves with the return value', async () => {
    const value = await pg.transaction(async (tx) => {
      await tx.query('insert into w_tx values (10)')
      await tx.rollback()
      expect(tx.closed).toBe(true)
      return 'kept'
    })
    expect(value).toBe('kept')
    expect((await pg.query('select * from w_tx where id = 10')).rows).toEqual([])
  })

  it('rolls back when the callback throws and rethrows the same error', async () => {
    const thrown = new Error('changed my mind')
    const error = await rejection(
      pg.transaction(async (tx) => {
        await tx.query('insert into w_tx values (20)')
        throw thrown
      }),
    )
    expect(error).toBe(thrown)
    expect((await pg.query('select * from w_tx where id = 20')).rows).toEqual([])
  })

  it('rejects with DatabaseError 25P02 when a statement failed but the callback returned', async () => {
    const error = await rejection(
      pg.transaction(async (tx) => {
        await tx.query('insert into w_tx values (30)')
        await tx.query('insert into w_tx values (30)').catch(() => {})
      }),
    )
    expect(error).toBeInstanceOf(DatabaseError)
    expect((error as DatabaseError).code).toBe('25P02')
    expect((await pg.query('select * from w_tx where id = 30')).rows).toEqual([])
  })

  it('rejects statements on a finished transaction with ClosedError', async () => {
    let leaked: Parameters<Parameters<PGliteWorker['transaction']>[0]>[0] | undefined
    await pg.transaction(async (tx) => {
      leaked = tx
    })
    expect(await rejection(leaked!.query('select 1'))).toBeInstanceOf(ClosedError)
  })

  it('makes a query issued during a transaction wait and see the committed rows', async () => {
    let outside: Promise<Results> | undefined
    await pg.transaction(async (tx) => {
      await tx.query('insert into w_tx values (40)')
      outside = pg.query('select id from w_tx where id = 40')
      await tx.query('insert into w_tx values (41)')
    })
    expect((await outside!).rows).toEqual([{ id: 40 }])
  })
})

describe('PGliteWorker notifications', () => {
  it('delivers a NOTIFY sent through another query to listen and onNotification', async () => {
    const payload = deferred<string>()
    const global = deferred<[string, string]>()
    const unsubscribe = await pg.listen('w_events', (p) => payload.resolve(p))
    const off = pg.onNotification((channel, p) => global.resolve([channel, p]))
    await pg.query(`select pg_notify('w_events', 'hello')`)
    expect(await payload.promise).toBe('hello')
    expect(await global.promise).toEqual(['w_events', 'hello'])
    off()
    await unsubscribe()
  })

  it('stops calling a callback after unlisten', async () => {
    const seen: string[] = []
    const marker = deferred<void>()
    await pg.listen('w_gone', (p) => seen.push(p))
    await pg.listen('w_marker', () => marker.resolve())
    await pg.unlisten('w_gone')
    await pg.exec(`notify w_gone, 'late'; notify w_marker`)
    await marker.promise
    expect(seen).toEqual([])
    await pg.unlisten('w_marker')
  })

  it('listens inside a transaction', async () => {
    const payload = deferred<string>()
    await pg.transaction(async (tx) => {
      await tx.listen('w_in_tx', (p) => payload.resolve(p))
    })
    await pg.exec(`notify w_in_tx, 'after commit'`)
    expect(await payload.promise).toBe('after commit')
    await pg.unlisten('w_in_tx')
  })
})

describe('PGliteWorker shared-memory lane', () => {
  it('carries calls through shared memory in a worker thread, in order, with values and errors intact', async () => {
    await pg.query('select 1')
    expect(pg.usesSharedMemory).toBe(true)
    await pg.exec('create table w_lane (id int primary key, v text, b bytea, at timestamptz, n bigint, j jsonb)')
    const before = pg._internalStats()
    const at = new Date('2024-05-06T07:08:09.123Z')
    for (let i = 1; i <= 200; i++) {
      await pg.query('insert into w_lane values ($1, $2, $3, $4, $5, $6)', [i, `välue ${i}`, new Uint8Array([i & 255, 0, 7]), at, 2n ** 40n + BigInt(i), { i, tags: ['x'] }])
    }
    // One after another: the worker waits a few milliseconds for the next call after each reply,
    // so calls take the lane. How many do depends on how busy the machine is (a main thread
    // that stalls past the wait sends by message), so the share is the bench's to measure;
    // here every call went one way or the other and the lane carried some.
    const after = pg._internalStats()
    const viaLane = after.sharedCalls - before.sharedCalls
    expect(viaLane + after.messageCalls - before.messageCalls).toBe(200)
    expect(viaLane).toBeGreaterThan(0)
    const viaWorker = await pg.query('select * from w_lane order by id')
    expect(viaWorker.rows).toHaveLength(200)
    expect(viaWorker.rows[41]).toEqual({ id: 42, v: 'välue 42', b: new Uint8Array([42, 0, 7]), at, n: 2 ** 40 + 42, j: { i: 42, tags: ['x'] } })
    // Calls made together go by message, behind one another, in order.
    const together = await Promise.all(Array.from({ length: 30 }, (_, i) => pg.query<{ n: number }>('select count(*)::int + $1 as n from w_lane', [i])))
    expect(together.map((r) => r.rows[0]!.n)).toEqual(Array.from({ length: 30 }, (_, i) => 200 + i))
    const error = await rejection(pg.query('insert into w_lane (id) values (1)'))
    expect(error).toBeInstanceOf(DatabaseError)
    expect(error).toMatchObject({ code: '23505', constraint: 'w_lane_pkey' })
    // A result larger than the lane's memory comes by message.
    const big = await pg.query<{ s: string }>(`select repeat('x', 3000000) as s`)
    expect(big.rows[0]!.s.length).toBe(3_000_000)
    expect(pg.usesSharedMemory).toBe(true)
    expect((await pg.query<{ n: number }>('select count(*)::int as n from w_lane')).rows).toEqual([{ n: 200 }])
  })

  it('does not use shared memory over a port whose other end is on a main thread', async () => {
    const { port1, port2 } = new MessageChannel()
    const hostOnMain = worker({ port: port2, init: () => PGlite.create() })
    const own = await PGliteWorker.create(port1)
    await hostOnMain
    expect((await own.query<{ n: number }>('select $1::int as n', [7])).rows).toEqual([{ n: 7 }])
    expect(own.usesSharedMemory).toBe(false)
    await own.close()
    port1.close()
    port2.close()
  })
})

describe('PGliteWorker lifecycle', () => {
  it('works over ports that only have the browser shape (addEventListener, event.data)', async () => {
    const { port1, port2 } = new MessageChannel()
    const thread = new Worker(hostScript, { workerData: { port: port2 }, transferList: [port2] })
    threads.push(thread)
    const own = await PGliteWorker.create(webShaped(port1))
    expect((await own.query<{ n: number }>('select $1::int as n', [5])).rows).toEqual([{ n: 5 }])
    expect(await rejection(own.query('select * from no_such_table'))).toMatchObject({ code: '42P01' })
    const heard = deferred<string>()
    await own.listen('web', (p) => heard.resolve(p))
    await own.exec(`notify web, 'shaped'`)
    expect(await heard.promise).toBe('shaped')
    await own.close()
    port1.close()
  })

  it('resolves a second close() and rejects later calls with ClosedError; the thread then ends by itself', async () => {
    const { pg: own, exited } = start()
    await own.waitReady
    const first = own.close()
    expect(own.close()).toBe(first)
    await first
    await own.close()
    expect(own.closed).toBe(true)
    expect(await rejection(own.query('select 1'))).toBeInstanceOf(ClosedError)
    expect(await exited).toBe(0)
  })

  it('lets queries made before close() finish', async () => {
    const { pg: own } = start()
    const early = own.query('select 7 as n')
    await own.close()
    expect((await early).rows).toEqual([{ n: 7 }])
  })

  it('leaves the worker running after close() by default', async () => {
    const { pg: own, thread } = start('scripted')
    await own.waitReady
    await own.close()
    const pong = new Promise((resolve) => thread.once('message', resolve))
    thread.postMessage('ping')
    expect(await pong).toBe('pong')
  })

  it('terminates the worker when close() finishes with terminateOnClose', async () => {
    const { pg: own, exited } = start('scripted', { terminateOnClose: true })
    await own.waitReady
    let hasExited = false
    void exited.then(() => (hasExited = true))
    await own.close()
    await Promise.resolve()
    expect(hasExited).toBe(true)
  })

  it('refuses a directory this thread has open to a worker thread of the same process with DataDirLockedError; the first instance goes on', async () => {
    // The takeover of an open directory is per thread: the worker cannot close
    // an instance of another thread, so the directory's lock keeps it out.
    const dir = tempDir('pgwasm-worker-')
    const first = await PGlite.create(dir)
    try {
      const { pg: other } = start(undefined, { dataDir: dir })
      expect(await rejection(other.waitReady)).toBeInstanceOf(DataDirLockedError)
      expect((await first.query('select 1 as one')).rows).toEqual([{ one: 1 }])
    } finally {
      await first.close()
    }
  })

  it('rejects a pending query with EngineError ENGINE_EXIT when the worker is terminated, and later calls with ClosedError', async () => {
    // A directory database, so the request can leave a mark the test sees:
    // CREATE TABLE makes the table's file in the directory as the engine
    // begins the request, and the count keeps it busy long after.
    const dir = tempDir('pgwasm-worker-')
    const { pg: own, thread } = start(undefined, { dataDir: dir })
    await own.waitReady
    const tableFiles = (): string[] => readdirSync(join(dir, 'base', '5'))
    const before = new Set(tableFiles())
    const pending = own.exec(`create table started (v int); select count(*) from generate_series(1, 300000000)`)
    await expect.poll(() => tableFiles().some((f) => !before.has(f)), { timeout: 30_000 }).toBe(true)
    await thread.terminate()
    const error = await rejection(pending)
    expect(error).toBeInstanceOf(EngineError)
    expect((error as EngineError).code).toBe('ENGINE_EXIT')
    expect(own.closed).toBe(true)
    expect(await rejection(own.query('select 1'))).toBeInstanceOf(ClosedError)
    await own.close()
  })

  it('rejects every pending call with EngineError when the worker script throws', async () => {
    const { pg: own, thread } = start('scripted')
    await own.waitReady
    let queued: Promise<unknown> | undefined
    const transaction = own.transaction(async (tx) => {
      await tx.query('select 1')
      // Waits in the worker behind the open transaction: pending when the thread dies.
      queued = own.query('select 2')
      thread.postMessage('crash')
      await tx.query('select pg_sleep(0)')
    })
    const txError = await rejection(transaction)
    const queryError = await rejection(queued!)
    for (const error of [txError, queryError]) {
      expect(error).toBeInstanceOf(EngineError)
      expect((error as EngineError).code).toBe('ENGINE_EXIT')
    }
    expect(((queryError as EngineError).cause as Error).message).toBe('the worker script crashed')
  })

  it('dumps the data directory to a File that PGlite loads', async () => {
    await pg.exec(`create table w_dump (v text); insert into w_dump values ('kept')`)
    const file = await pg.dumpDataDir()
    expect(file).toBeInstanceOf(Blob)
    expect((file as File).name).toBe('pgdata.tar.gz')
    const loaded = await PGlite.create({ loadDataDir: file })
    try {
      expect((await loaded.query('select v from w_dump')).rows).toEqual([{ v: 'kept' }])
    } finally {
      await loaded.close()
    }
  })

  it('writes nothing to the console, on either side', async () => {
    const methods = ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const
    const spies = methods.map((m) => vi.spyOn(console, m))
    try {
      const { pg: own, output, exited } = start()
      await own.waitReady
      await own.exec('create table quiet (id int primary key)')
      await own.query('insert into quiet values (1)')
      await rejection(own.query('insert into quiet values (1)'))
      const heard = deferred<string>()
      await own.listen('quiet', (p) => heard.resolve(p))
      await own.exec(`notify quiet, 'shh'`)
      await heard.promise
      await rejection(own.transaction(async () => Promise.reject(new Error('rolled back'))))
      await own.close()
      await exited
      expect(output()).toBe('')
      for (const spy of spies) expect(spy).not.toHaveBeenCalled()
    } finally {
      for (const spy of spies) spy.mockRestore()
    }
  })
})
