import { connect } from 'node:net'
import fc from 'fast-check'
import { serialize } from 'pg-protocol'
import { describe, expect, it } from 'vitest'
import { HOST, pgClient, startupPacket, useServedDatabase } from './helpers.js'

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

/** Sends the startup packet then `bytes`, and waits until the server answers or closes (bounded). */
function throwAtServer(port: number, bytes: Uint8Array): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, HOST)
    let replies = 0
    const done = (): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve()
    }
    const timer = setTimeout(done, 300)
    socket.on('error', done)
    socket.on('close', done)
    socket.on('connect', () => {
      socket.write(startupPacket())
      socket.write(bytes)
    })
    socket.on('data', () => {
      // First the handshake, then whatever our bytes got: enough seen.
      if (++replies >= 2) setTimeout(done, 20)
    })
  })
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
          await throwAtServer(served.port, bytes)
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
