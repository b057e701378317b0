import { connect } from 'node:net'
import fc from 'fast-check'
import { serialize } from 'pg-protocol'
import { describe, expect, it } from 'vitest'
import { startupPacket } from '@pgwasm/test-support/frontend'
import { HOST } from '@pgwasm/test-support/net'
import { pgClient, useServedDatabase } from './helpers.js'

const validMessages = [
  serialize.query('select 1'),
  Buffer.concat([serialize.parse({ name: 'fz', text: 'select $1::int as n' }), serialize.bind({ statement: 'fz', values: ['7'] }), serialize.describe({ type: 'P' }), serialize.execute({}), serialize.sync()]),
  serialize.query('begin; select 1; commit'),
  serialize.query('begin'),
]

/** Mutations of valid client bytes: truncation, wrong lengths, flipped and foreign bytes. */
const mutated = fc
  .tuple(fc.constantFrom(...validMessages), fc.nat(), fc.integer({ min: 0, max: 5 }), fc.uint8Array({ maxLength: 64 }), fc.integer())
  .map(([message, at, kind, garbage, value]) => {
    const bytes = Buffer.from(message)
    const i = at % bytes.length
    switch (kind) {
      case 0:
        return bytes.subarray(0, i)
      case 1:
        bytes.writeInt32BE(value | 0, Math.min(i, bytes.length - 4) & ~0 /* any offset */)
        return bytes
      case 2:
        bytes[i] = bytes[i]! ^ (1 + (value & 0xfe))
        return bytes
      case 3:
        bytes[0] = value & 0xff
        return bytes
      case 4:
        return Buffer.concat([bytes, Buffer.from(garbage)])
      default:
        return Buffer.from(garbage)
    }
  })

/** What the server did with one input: every frame it sent after the handshake, and whether it closed. */
interface Verdict {
  frames: { type: string; body: Buffer }[]
  /** Bytes after the last whole frame: the server never sends half a frame and stops. */
  trailing: number
  closedByServer: boolean
}

const BACKEND_TYPES = new Set('RSKZTDCEINAnst123GHdcWv'.split(''))
const FRONTEND_TYPES = new Set('QPBDESHCdcfFXp'.split(''))

/** Sends the startup packet then `bytes`; collects the answer until the server closes or 400 ms pass. */
function throwAtServer(port: number, bytes: Uint8Array): Promise<Verdict> {
  return new Promise((resolve) => {
    const socket = connect(port, HOST)
    const chunks: Buffer[] = []
    let closedByServer = false
    const done = (): void => {
      clearTimeout(timer)
      socket.destroy()
      const all = Buffer.concat(chunks)
      const frames: Verdict['frames'] = []
      let at = 0
      while (at + 5 <= all.length) {
        const length = all.readInt32BE(at + 1)
        if (length < 4 || at + 1 + length > all.length) break
        frames.push({ type: String.fromCharCode(all[at]!), body: all.subarray(at + 5, at + 1 + length) })
        at += 1 + length
      }
      // Drop the handshake: up to and including the first ReadyForQuery.
      const ready = frames.findIndex((f) => f.type === 'Z')
      resolve({ frames: frames.slice(ready + 1), trailing: all.length - at, closedByServer })
    }
    const timer = setTimeout(done, 400)
    socket.on('error', done)
    socket.on('end', () => {
      closedByServer = true
      done()
    })
    socket.on('connect', () => {
      socket.write(startupPacket())
      socket.write(bytes)
    })
    socket.on('data', (chunk) => chunks.push(chunk))
  })
}

/** The field of an ErrorResponse with the given code letter. */
function field(body: Buffer, code: string): string | undefined {
  let at = 0
  while (at < body.length && body[at] !== 0) {
    const end = body.indexOf(0, at + 1)
    if (String.fromCharCode(body[at]!) === code) return body.toString('utf8', at + 1, end)
    at = end + 1
  }
  return undefined
}

/** The README's promise, per input: FATAL 08P01 and a close for malformed input, otherwise well-formed replies. */
function checkVerdict(bytes: Uint8Array, v: Verdict): void {
  expect(v.trailing, 'the server sent half a frame').toBe(0)
  for (const f of v.frames) expect(BACKEND_TYPES.has(f.type), `unknown backend message ${f.type}`).toBe(true)
  const fatal = v.frames.find((f) => f.type === 'E' && field(f.body, 'S') === 'FATAL')
  // A connection the server ends, it ends with a FATAL that says why; and it ends every one it sent a FATAL to.
  if (v.closedByServer) expect(fatal, 'closed without a FATAL').toBeDefined()
  if (fatal) expect(v.closedByServer, `a FATAL (${field(fatal.body, 'M')}) but the connection stayed open`).toBe(true)
  // An unknown message type in a whole header is malformed input.
  if (bytes.length >= 5 && !FRONTEND_TYPES.has(String.fromCharCode(bytes[0]!))) {
    expect(fatal && field(fatal.body, 'C')).toBe('08P01')
  }
}

describe('socket server fuzzing', () => {
  const served = useServedDatabase({ syncTimeoutMs: 200 }, (db) =>
    db.exec('create table steady (id int primary key, v int); insert into steady values (1, 0)'),
  )

  it('keeps serving a steady client while random and mutated client bytes arrive on other connections', async () => {
    const steady = await pgClient(served.port)
    let stop = false
    let steadyQueries = 0
    const workload = (async () => {
      while (!stop) {
        await steady.query('update steady set v = v + 1 where id = 1')
        const { rows } = await steady.query<{ v: number }>('select v from steady where id = 1')
        steadyQueries++
        if (rows[0]!.v !== steadyQueries) throw new Error(`steady client saw ${rows[0]!.v} after ${steadyQueries} updates`)
      }
    })()
    try {
      await fc.assert(
        fc.asyncProperty(fc.oneof(mutated, fc.uint8Array({ minLength: 1, maxLength: 200 })), async (bytes) => {
          checkVerdict(bytes, await throwAtServer(served.port, bytes))
        }),
        { numRuns: Number(process.env.FUZZ_RUNS ?? 300), seed: 20251122 },
      )
    } finally {
      stop = true
      await workload
    }
    expect(steady.errors).toEqual([])
    expect(steadyQueries).toBeGreaterThan(0)
    await steady.end()
    // The server still takes new clients and the engine is not stuck in a transaction.
    const fresh = await pgClient(served.port)
    expect((await fresh.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
    await fresh.end()
    expect((await served.db.query<{ v: number }>('select v from steady where id = 1')).rows[0]!.v).toBe(steadyQueries)
  }, 300_000)
})
