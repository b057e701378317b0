import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { errorFields } from '@pgwasm/test-support/backend'
import { int32, queryFrame } from '@pgwasm/test-support/frontend'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { PGlite } from '@pgwasm/pglite'
import { endQuietly, pgClient, runCli, serve, type Served } from './helpers.js'

/*
 * The attack (issue "hardening", item 2): after login, clients announce
 * huge Query messages and send them slowly. The server held each whole
 * (1e9 bytes announced, 600 MB sent: six clients took it to 3.85 GB, eight
 * got it OOM-killed). Now what all clients have sent and the server holds
 * has one server-wide bound (`maxIncomingBytesTotal`): the client whose
 * bytes pass it is ended with FATAL 53200, the others go on, and a buffer
 * grown for a large message is given back once it is read.
 */

const MB = 1024 * 1024
const LIMIT = 24 * MB

/** A client that has announced a Query of `announced` bytes and sent `sent` bytes of it. */
async function halfSent(port: number, announced: number, sent: number): Promise<RawClient> {
  const raw = new RawClient(port)
  await raw.handshake()
  raw.write(Buffer.concat([Buffer.from('Q'), int32(announced)]))
  const chunk = Buffer.alloc(MB, 0x20)
  for (let n = 0; n < sent; n += chunk.length) raw.write(chunk.subarray(0, Math.min(chunk.length, sent - n)))
  return raw
}

describe('clients that announce huge messages and send them slowly', () => {
  let db: PGlite
  let served: Served
  const raws: RawClient[] = []
  beforeAll(async () => {
    db = await PGlite.create()
    served = await serve(db, { maxIncomingBytesTotal: LIMIT })
  })
  afterAll(async () => {
    for (const raw of raws) raw.destroy()
    await served.server.stop()
    await db.close()
  })

  it('are held to the server-wide bound: the client that passes it gets FATAL 53200, the others and new clients go on', async () => {
    const first = await halfSent(served.port, 1e9, 10 * MB)
    const second = await halfSent(served.port, 1e9, 10 * MB)
    raws.push(first, second)
    // Both fit: they stay connected.
    const c = await pgClient(served.port)
    expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }])
    expect(first.isClosed || second.isClosed).toBe(false)
    // The third passes the bound: it is the one ended.
    const third = await halfSent(served.port, 1e9, 10 * MB)
    raws.push(third)
    const messages = await within(third.rest(), 10_000, 'the third client to be ended')
    const error = messages.find((m) => m.type === 'E')
    expect(error && errorFields(error.body)).toMatchObject({ S: 'FATAL', C: '53200' })
    expect(error && errorFields(error.body).M).toMatch(/unfinished messages would take more than the server's limit of 25165824 bytes/)
    expect(first.isClosed || second.isClosed).toBe(false)
    expect((await c.query('select 2 as two')).rows).toEqual([{ two: 2 }])
    await endQuietly(c)
  }, 60_000)

  it('take nothing once they leave: a client may then send a message as large as the bound allows', async () => {
    for (const raw of raws.splice(0)) {
      raw.destroy()
      await raw.closed
    }
    const c = await pgClient(served.port)
    try {
      // 20 MB of SQL in one Query: under the bound only because the half-sent messages went with their clients.
      const padding = ' '.repeat(20 * MB)
      expect((await c.query(`select 3 as three${padding}`)).rows).toEqual([{ three: 3 }])
      expect((await c.query('select 4 as four')).rows).toEqual([{ four: 4 }])
    } finally {
      await endQuietly(c)
    }
  }, 60_000)

  it('finish normally when under the bound: a whole large query sent slowly runs', async () => {
    const raw = new RawClient(served.port)
    raws.push(raw)
    await raw.handshake()
    const sql = `select length('${'x'.repeat(8 * MB)}') as n`
    const whole = queryFrame(sql)
    for (let at = 0; at < whole.length; at += MB) raw.write(whole.subarray(at, at + MB))
    const reply = await within(raw.until('Z'), 10_000, 'the large query to run')
    expect(reply.map((m) => m.type).join('')).toBe('TDCZ')
  }, 60_000)
})

describe('pgwasm-server --max-incoming-total', () => {
  it('refuses a size that is not one', async () => {
    const result = await runCli(['--max-incoming-total', 'lots'])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/--max-incoming-total must be a positive whole number of bytes, kB, MB or GB, got lots/)
  })
})
