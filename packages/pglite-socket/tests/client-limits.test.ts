/**
 * What one client can make the server do or hold: nothing before it
 * authenticated, a bounded amount of its data, and never the engine while
 * it is silent in the middle of an extended-protocol sequence.
 */
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { deferred, within } from '@pgwasm/test-support/async'
import { errorFields } from '@pgwasm/test-support/backend'
import { cstr, frame, int32, queryFrame } from '@pgwasm/test-support/frontend'
import { RawClient, withRawClient } from '@pgwasm/test-support/raw-client'
import { PGliteServer } from '../src/index.js'
import { pgClient, useDatabase, useServedDatabase } from './helpers.js'

describe('database names in the startup packet', () => {
  const served = useServedDatabase()

  it('refuses a database that does not exist with FATAL 3D000, as Postgres does', async () => {
    await expect(pgClient(served.port, { database: 'no_such_db' })).rejects.toMatchObject({
      code: '3D000',
      message: 'database "no_such_db" does not exist',
    })
    const client = await served.connect()
    expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  })
})

describe('createDatabaseOnConnect and authentication', () => {
  const database = useDatabase()

  it('makes no instance for a new database name until the client has authenticated', async () => {
    const made: string[] = []
    const server = new PGliteServer({
      db: database.db,
      host: '127.0.0.1',
      port: 0,
      password: 'secret',
      authMethod: 'md5',
      createDatabaseOnConnect: true,
      createDatabase: async (name) => {
        made.push(name)
        return PGlite.create()
      },
    })
    const address = await server.start()
    const port = 'port' in address ? address.port : 0
    try {
      await expect(pgClient(port, { database: 'fresh', password: 'wrong' })).rejects.toMatchObject({ code: '28P01' })
      expect(made).toEqual([])
      const client = await pgClient(port, { database: 'fresh', password: 'secret' })
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }])
      await client.end()
      expect(made).toEqual(['fresh'])
    } finally {
      await server.stop()
    }
  })
})

describe('wrong passwords', () => {
  const served = useServedDatabase({ password: 'secret', authMethod: 'md5' })

  it('are answered with 28P01 each, and the right password still gets in after them', async () => {
    for (let i = 0; i < 3; i++) {
      await expect(pgClient(served.port, { password: `guess${i}` })).rejects.toMatchObject({ code: '28P01' })
    }
    const client = await served.connect({ password: 'secret' })
    expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  })
})

describe('an empty password', () => {
  const database = useDatabase()

  it('counts as no password: listening beyond loopback with it is refused', async () => {
    const server = new PGliteServer({ db: database.db, host: '0.0.0.0', port: 0, password: '' })
    try {
      await expect(server.start()).rejects.toThrow(/password/)
    } finally {
      await server.stop()
    }
  })
})

describe('an extended-protocol sequence without its Sync', () => {
  const served = useServedDatabase()

  it('does not hold the engine while its client is silent, and runs once the Sync comes', async () => {
    await withRawClient(served.port, async (raw) => {
      const parse = frame('P', Buffer.concat([cstr('', 'select $1::int + 1 as n'), Buffer.from([0, 0])]))
      // Bind: no parameter formats, one text parameter '4', no result formats.
      const bind = frame('B', Buffer.concat([cstr('', ''), Buffer.from([0, 0, 0, 1]), int32(1), Buffer.from('4'), Buffer.from([0, 0])]))
      raw.write(Buffer.concat([parse, bind]))
      const other = await served.connect()
      // Before, this waited for the silent client's Sync (or its syncTimeoutMs).
      const { rows } = await within(other.query('select 2 as two'), 10_000, 'a query of another client')
      expect(rows).toEqual([{ two: 2 }])
      raw.write(Buffer.concat([frame('E', Buffer.concat([cstr(''), int32(0)])), frame('S')]))
      const reply = await raw.until('Z')
      expect(reply.map((m) => m.type)).toEqual(['1', '2', 'D', 'C', 'Z'])
      expect(reply[2]!.body.subarray(6).toString()).toBe('5')
    })
  })
})

describe('COPY data held before CopyDone', () => {
  const served = useServedDatabase({ maxCopyBytes: 1000 }, (db) => db.exec('create table copied (t text)'))

  it('fails a COPY FROM STDIN whose data passes maxCopyBytes with 57014, drops the rest of it, and keeps the connection', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame('copy copied from stdin'))
      expect((await raw.next())?.type).toBe('G')
      const line = Buffer.from(`${'x'.repeat(399)}\n`)
      for (let i = 0; i < 5; i++) raw.write(frame('d', line))
      raw.write(frame('c'))
      const reply = await raw.until('Z')
      const error = reply.find((m) => m.type === 'E')
      expect(error && errorFields(error.body)).toMatchObject({ C: '57014' })
      expect(errorFields(error!.body).M).toMatch(/maxCopyBytes/)
      raw.write(queryFrame(`select count(*) from copied where t like 'x%'`))
      const after = await raw.until('Z')
      expect(after.map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
      expect(after[1]!.body.subarray(6).toString()).toBe('0')
    })
  })

  it('loads COPY data under maxCopyBytes', async () => {
    const client = await served.connect()
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame('copy copied from stdin'))
      expect((await raw.next())?.type).toBe('G')
      raw.write(Buffer.concat([frame('d', Buffer.from('a\nb\n')), frame('c')]))
      expect((await raw.until('Z')).map((m) => m.type)).toEqual(['C', 'Z'])
    })
    expect((await client.query(`select count(*)::int as n from copied where t in ('a', 'b')`)).rows).toEqual([{ n: 2 }])
  })
})

describe('a client that does not read its results', () => {
  const served = useServedDatabase({ maxUnreadBytes: 1024 * 1024 })

  it('is dropped once more than maxUnreadBytes of output waits for it, and the others go on', async () => {
    const raw = new RawClient(served.port)
    await raw.handshake()
    const gone = once(served.server, 'disconnect')
    raw.socket.pause()
    raw.write(queryFrame("select repeat('x', 1000000) from generate_series(1, 64)"))
    await within(gone, 20_000, 'the server to drop the client that does not read')
    raw.destroy()
    const other = await served.connect()
    expect((await other.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  })
})

describe('many clients that do not read their results', () => {
  const served = useServedDatabase({ maxUnreadBytes: 64 * 1024 * 1024, maxUnreadBytesTotal: 40 * 1024 * 1024 })

  it('are dropped once their unread output together passes maxUnreadBytesTotal, each one under its own cap, and the others go on', async () => {
    let dropped = 0
    served.server.on('disconnect', () => dropped++)
    const raws: RawClient[] = []
    try {
      for (let i = 0; i < 4; i++) {
        const raw = new RawClient(served.port)
        await raw.handshake()
        raw.socket.pause()
        raws.push(raw)
      }
      const other = await served.connect()
      // ~20 MB each (less what the kernel's socket buffers take): two fit under the 40 MB, the third and fourth do not.
      for (const raw of raws) {
        raw.write(queryFrame("select repeat('x', 1000000) from generate_series(1, 20)"))
        // Each request runs before the next is sent (the other client's round trip waits behind it).
        expect((await other.query('select 1 as one')).rows).toEqual([{ one: 1 }])
      }
      await within(
        (async () => {
          while (dropped < 2) await new Promise((resolve) => setTimeout(resolve, 20))
        })(),
        20_000,
        'two of the four clients to be dropped',
      )
      expect(dropped).toBe(2)
      expect((await other.query('select 2 as two')).rows).toEqual([{ two: 2 }])
    } finally {
      for (const raw of raws) raw.destroy()
    }
  })
})

describe('a client that reads its results slowly', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table marks (n int)'))

  it('gets no new request run while much of its output is unread, and all of it once it reads', async () => {
    const observer = await served.connect()
    const marks = async (): Promise<number[]> =>
      (await observer.query<{ n: number }>('select n from marks order by n')).rows.map((r) => r.n)
    const raw = new RawClient(served.port)
    await raw.handshake()
    raw.socket.pause()
    raw.write(queryFrame("insert into marks values (1); select repeat('x', 1000000) from generate_series(1, 32)"))
    while (!(await marks()).includes(1)) await new Promise((resolve) => setImmediate(resolve))
    raw.write(queryFrame('insert into marks values (2)'))
    // Round trips of another client after the second request was sent: it stays unrun.
    for (let i = 0; i < 20; i++) expect(await marks()).toEqual([1])
    // Read on without keeping the 32 MB: only the end of the stream matters.
    raw.socket.removeAllListeners('data')
    let tail = Buffer.alloc(0)
    let received = 0
    const done = deferred()
    const end = Buffer.concat([Buffer.from('INSERT 0 1\0'), Buffer.from('Z'), int32(5), Buffer.from('I')])
    raw.socket.on('data', (chunk: Buffer) => {
      received += chunk.length
      tail = Buffer.concat([tail, chunk]).subarray(-64)
      if (tail.subarray(-end.length).equals(end)) done.resolve()
    })
    raw.socket.resume()
    await within(done.promise, 20_000, 'both results')
    expect(received).toBeGreaterThan(32_000_000)
    expect(await marks()).toEqual([1, 2])
    raw.destroy()
  })
})
