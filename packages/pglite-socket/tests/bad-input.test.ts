import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Waiters, within } from '@pgwasm/test-support/async'
import { errorFields, type BackendMessage } from '@pgwasm/test-support/backend'
import { cstr, frame, int32, queryFrame, startupPacket } from '@pgwasm/test-support/frontend'
import { RawClient, withRawClient } from '@pgwasm/test-support/raw-client'
import { endQuietly, pgClient, useServedDatabase, type TestClient } from './helpers.js'

/** Bound for waiting on something the server must do by itself. */
const WAIT_MS = 10_000
/** The steady client stops after this many queries at the latest. */
const STEADY_MAX = 200_000

/**
 * A pg client querying in a loop in the background, to show bad input on
 * other connections does not disturb it.
 */
class Steady {
  count = 0
  readonly failures: string[] = []
  #stop = false
  readonly #answered = new Waiters()
  done: Promise<void> = Promise.resolve()
  client!: TestClient

  async start(port: number): Promise<void> {
    this.client = await pgClient(port)
    this.done = this.#loop()
  }

  async #loop(): Promise<void> {
    for (let i = 0; i < STEADY_MAX && !this.#stop; i++) {
      try {
        const { rows } = await this.client.query('select $1::int + 1 as n', [i])
        if (rows[0]?.n !== i + 1) this.failures.push(`query ${i} returned ${JSON.stringify(rows)}`)
      } catch (err) {
        this.failures.push(`query ${i} failed: ${String(err)}`)
        break
      } finally {
        this.count++
        this.#answered.wake()
      }
    }
  }

  /** Resolves once `n` more queries have been answered. */
  async advance(n = 3): Promise<void> {
    const target = this.count + n
    const reached = (async () => {
      while (this.count < target) {
        if (this.failures.length > 0) throw new Error(`the steady client failed: ${this.failures.join('; ')}`)
        await this.#answered.next()
      }
    })()
    await within(reached, WAIT_MS, `the steady client to answer ${n} more queries`)
    expect(this.failures).toEqual([])
  }

  async stop(): Promise<void> {
    this.#stop = true
    await this.done
    await endQuietly(this.client)
  }
}

/** Deterministic pseudo-random bytes (xorshift32). */
function garbage(seed: number, length: number): Buffer {
  const out = Buffer.alloc(length)
  let x = seed >>> 0 || 1
  for (let i = 0; i < length; i++) {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    out[i] = x & 0xff
  }
  return out
}

function expectFatal(messages: BackendMessage[], code: string): void {
  expect(messages.map((m) => m.type)).toEqual(['E'])
  const fields = errorFields(messages[0]!.body)
  expect(fields.S).toBe('FATAL')
  expect(fields.C).toBe(code)
}

describe('bad input on raw connections', () => {
  const served = useServedDatabase()
  const steady = new Steady()

  beforeAll(async () => {
    await steady.start(served.port)
  })

  afterAll(async () => {
    await steady.stop()
  })

  /** Sends `bytes` on a new connection (after a handshake if asked) and collects the reply until the server closes. */
  async function send(bytes: Buffer, options: { handshake?: boolean; endAfter?: boolean } = {}): Promise<BackendMessage[]> {
    const raw = new RawClient(served.port)
    try {
      if (options.handshake) await raw.handshake()
      else await raw.connected
      raw.write(bytes)
      if (options.endAfter) raw.socket.end()
      const reply = await within(raw.rest(), WAIT_MS, 'the server to answer and close')
      expect(raw.isClosed).toBe(true)
      return reply
    } finally {
      raw.destroy()
    }
  }

  it('answers random garbage instead of a startup packet with a FATAL error or a disconnect', async () => {
    for (const seed of [1, 7, 42, 1234, 99_999]) {
      const reply = await send(garbage(seed, 1024), { endAfter: true })
      for (const m of reply) {
        expect(m.type).toBe('E')
        expect(errorFields(m.body).S).toBe('FATAL')
      }
    }
    await steady.advance()
  })

  it('rejects a startup packet whose length field claims 2 GiB with FATAL 08P01', async () => {
    expectFatal(await send(Buffer.concat([int32(0x80000000), int32(196608)])), '08P01')
    await steady.advance()
  })

  it('rejects a startup packet shorter than its header with FATAL 08P01', async () => {
    expectFatal(await send(Buffer.concat([int32(4), int32(196608)])), '08P01')
    await steady.advance()
  })

  it('rejects an unsupported protocol version with FATAL 0A000', async () => {
    const packet = startupPacket()
    packet.writeUInt32BE(0x00020000, 4)
    expectFatal(await send(packet), '0A000')
    await steady.advance()
  })

  it('rejects a frame whose length field is 0x7fffffff after startup with FATAL 08P01', async () => {
    expectFatal(await send(Buffer.concat([Buffer.from('Q'), int32(0x7fffffff), Buffer.from('select 1')]), { handshake: true }), '08P01')
    await steady.advance()
  })

  it('rejects a frame whose length field is below 4 with FATAL 08P01', async () => {
    expectFatal(await send(Buffer.concat([Buffer.from('Q'), int32(2)]), { handshake: true }), '08P01')
    await steady.advance()
  })

  it('rejects an unknown message type 0x01 after startup with FATAL 08P01', async () => {
    expectFatal(await send(frame(0x01, Buffer.from('hello')), { handshake: true }), '08P01')
    await steady.advance()
  })

  // Postgres's per-type limits (PQ_SMALL_MESSAGE_LIMIT): checked on the header, before the body is read.
  it.each([
    ['Sync', 'S'],
    ['Flush', 'H'],
    ['Terminate', 'X'],
    ['Describe', 'D'],
    ['Close', 'C'],
    ['Execute', 'E'],
    ['CopyDone', 'c'],
    ['CopyFail', 'f'],
  ])('rejects a %s whose length field claims 1 MB with FATAL 08P01, before its body arrives', async (_name, type) => {
    const reply = await send(Buffer.concat([Buffer.from(type), int32(1 << 20)]), { handshake: true })
    expectFatal(reply, '08P01')
    expect(errorFields(reply[0]!.body).M).toMatch(/at most 10000 bytes/)
    await steady.advance()
  })

  it('passes a Sync of exactly 10000 bytes on, and Postgres answers its extra bytes with an ordinary error', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(frame('S', Buffer.alloc(9996)))
      const reply = await within(raw.until('Z'), WAIT_MS, 'the reply')
      expect(reply.map((m) => m.type)).toEqual(['E', 'Z'])
      expect(errorFields(reply[0]!.body)).toMatchObject({ S: 'ERROR', C: '08P01' })
      raw.write(queryFrame('select 1'))
      expect((await within(raw.until('Z'), WAIT_MS, 'select 1')).map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
    })
    await steady.advance()
  })

  it('serves a prepared statement whose name fills a Describe and an Execute to their 10000-byte limit', async () => {
    await withRawClient(served.port, async (raw) => {
      // Describe: 4 length + 1 kind + 9994 name + NUL; Execute: 4 + 9991 name + NUL + 4 row limit.
      const statement = 's'.repeat(9994)
      const portal = 'p'.repeat(9991)
      raw.write(
        Buffer.concat([
          frame('P', Buffer.concat([cstr(statement, 'select 7 as n'), Buffer.from([0, 0])])),
          frame('D', Buffer.concat([Buffer.from('S'), cstr(statement)])),
          frame('B', Buffer.concat([cstr(portal, statement), Buffer.from([0, 0, 0, 0, 0, 0])])),
          frame('E', Buffer.concat([cstr(portal), int32(0)])),
          frame('S'),
        ]),
      )
      const reply = await within(raw.until('Z'), WAIT_MS, 'the reply')
      expect(reply.map((m) => m.type)).toEqual(['1', 't', 'T', '2', 'D', 'C', 'Z'])
      raw.write(frame('D', Buffer.concat([Buffer.from('S'), cstr('n'.repeat(9994))])))
      raw.write(frame('S'))
      const missing = await within(raw.until('Z'), WAIT_MS, 'the reply')
      expect(missing.map((m) => m.type)).toEqual(['E', 'Z'])
      expect(errorFields(missing[0]!.body).C).toBe('26000')
    })
    await steady.advance()
  })

  it('rejects an oversized CopyDone in the middle of a COPY with FATAL 08P01 and rolls the COPY back', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame('create table if not exists oversized_copy (a int); insert into oversized_copy values (1); copy oversized_copy from stdin'))
      expect((await within(raw.until('G'), WAIT_MS, 'CopyInResponse')).map((m) => m.type)).toEqual(['C', 'C', 'G'])
      raw.write(Buffer.concat([frame('d', Buffer.from('2\n')), Buffer.from('c'), int32(20_000)]))
      expectFatal(await within(raw.rest(), WAIT_MS, 'the server to answer and close'), '08P01')
    })
    const other = await served.connect()
    expect((await other.query("select to_regclass('oversized_copy') is null as gone")).rows).toEqual([{ gone: true }])
    await steady.advance()
  })

  it('drops a client that sends half a message and closes, without a reply', async () => {
    const truncated = Buffer.concat([Buffer.from('Q'), int32(100), Buffer.from('select 1')])
    expect(await send(truncated, { handshake: true, endAfter: true })).toEqual([])
    await steady.advance()
  })

  it('answers a Query whose string lacks its NUL with ERROR 08P01 and keeps the connection usable', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(frame('Q', Buffer.from('select 1')))
      const reply = await within(raw.until('Z'), WAIT_MS, 'the reply')
      expect(reply.map((m) => m.type)).toEqual(['E', 'Z'])
      expect(errorFields(reply[0]!.body).C).toBe('08P01')
      raw.write(queryFrame('select 1'))
      expect((await within(raw.until('Z'), WAIT_MS, 'select 1')).map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
    })
    await steady.advance()
  })

  it('answers a Bind that claims more parameters than it carries with ERROR 08P01', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(
        Buffer.concat([
          frame('P', Buffer.concat([cstr('', 'select $1::int'), Buffer.from([0, 0])])),
          frame('B', Buffer.concat([cstr('', ''), Buffer.from([0, 0, 0, 5])])),
          frame('S'),
        ]),
      )
      const reply = await within(raw.until('Z'), WAIT_MS, 'the reply')
      expect(reply.map((m) => m.type)).toEqual(['1', 'E', 'Z'])
      expect(errorFields(reply[1]!.body).C).toBe('08P01')
    })
    await steady.advance()
  })

  it('ignores CopyData and CopyDone sent outside COPY, like Postgres', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(Buffer.concat([frame('d', Buffer.from('stray\n')), frame('c'), queryFrame('select 1')]))
      expect((await within(raw.until('Z'), WAIT_MS, 'select 1')).map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
    })
    await steady.advance()
  })

  it.each([
    ['SSLRequest', 80877103],
    ['GSSENCRequest', 80877104],
  ])('answers %s with N and then accepts a normal startup', async (_name, code) => {
    const raw = new RawClient(served.port)
    try {
      await raw.connected
      raw.write(Buffer.concat([int32(8), int32(code)]))
      expect(await within(raw.readByte(), WAIT_MS, 'the answer')).toBe('N')
      raw.write(startupPacket())
      expect((await within(raw.until('Z'), WAIT_MS, 'the startup')).at(-1)?.type).toBe('Z')
      raw.write(queryFrame('select 1'))
      expect((await within(raw.until('Z'), WAIT_MS, 'select 1')).map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
    } finally {
      raw.destroy()
    }
    await steady.advance()
  })

  it('accepts a CancelRequest for a live session, closes that connection, and the target keeps working', async () => {
    const target = steady.client as unknown as { processID: number; secretKey: number }
    const cancel = Buffer.concat([int32(16), int32(80877102), int32(target.processID), int32(target.secretKey)])
    expect(await send(cancel)).toEqual([])
    await steady.advance(5)
  })

  it('serves a new client after all of the above', async () => {
    const client = await served.connect()
    expect((await client.query('select $1::text as hello', ['world'])).rows).toEqual([{ hello: 'world' }])
  })

  it('has had every query of the steady client answered correctly', async () => {
    // The steady client keeps going (afterAll stops it): the other tests may run after this one.
    await steady.advance(5)
    expect(steady.failures).toEqual([])
    expect(steady.client.errors).toEqual([])
    expect(steady.count).toBeGreaterThan(0)
  })
})

describe('COPY FROM STDIN through the extended protocol: a client that leaves in the middle', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table copy_target (id int)'))

  it('leaves the engine in sync after a client left while its extended-protocol COPY FROM STDIN waited for data', async () => {
    const left = await withRawClient(served.port, async (raw) => {
      raw.write(extendedCopyFromStdin())
      // Wait for CopyInResponse (the Sync is ignored during COPY, as Postgres ignores it), then leave.
      for (;;) {
        const m = await within(raw.next(), WAIT_MS, 'a CopyInResponse')
        if (!m || m.type === 'G') break
      }
      return raw
    })
    await left.closed
    expect((await served.db.query('select 41 + 1 as answer, count(*)::int as rows from copy_target')).rows).toEqual([{ answer: 42, rows: 0 }])
  })
})

/** Parse, Bind, Execute and Sync of `COPY copy_target FROM STDIN`, with no data. */
function extendedCopyFromStdin(): Buffer {
  return Buffer.concat([
    frame('P', Buffer.concat([cstr('', 'copy copy_target from stdin'), Buffer.from([0, 0])])),
    frame('B', Buffer.concat([cstr('', ''), Buffer.from([0, 0, 0, 0, 0, 0])])),
    frame('E', Buffer.concat([cstr(''), int32(0)])),
    frame('S'),
  ])
}
