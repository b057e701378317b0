import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { errorFields, type BackendMessage } from '@pgwasm/test-support/backend'
import { frame, queryFrame, copyData, copyDone, copyFail } from '@pgwasm/test-support/frontend'
import { HOST } from '@pgwasm/test-support/net'
import { hasProgram, libpqEnv, run } from '@pgwasm/test-support/processes'
import { ThreadClient } from '@pgwasm/test-support/raw-client'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import type { PGliteServerOptions } from '../src/index.js'
import { serve, type Served } from './helpers.js'

// A COPY FROM STDIN past 1 MB of data runs while the rest arrives, the
// engine reading it from the client's socket (copy-stream.ts). The clients
// here send from another thread or process, as a client of a real server
// does: a socket of the server's own thread is never read that way.
const hasPsql = hasProgram('psql')
const ROW = 'r'.repeat(200)
/** COPY text of rows `from`..`to`, one line each. */
const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${from + i}\t${ROW}\n`).join('')
const md5 = (text: string) => createHash('md5').update(text).digest('hex')

function summary(m: BackendMessage): string {
  if (m.type === 'E' || m.type === 'N') {
    const f = errorFields(m.body)
    return `${m.type} ${f.C} ${f.M}`
  }
  if (m.type === 'C') return `C ${m.body.toString('utf8', 0, m.body.length - 1)}`
  if (m.type === 'Z') return `Z ${m.body.toString('latin1')}`
  return m.type
}

/** Frames of COPY text for rows 1..rows, about 64 kB each. */
function dataFrames(rows: number): Buffer[] {
  const out: Buffer[] = []
  for (let from = 1; from <= rows; from += 300) out.push(copyData(lines(from, Math.min(rows, from + 299))))
  return out
}

describe('COPY FROM STDIN streamed into the engine', () => {
  let db: PGlite
  let served: Served
  let dir: string
  const options: Omit<PGliteServerOptions, 'db'> = { maxCopyBytes: 4 * 1024 * 1024, copyStallMs: 400 }

  beforeAll(async () => {
    db = await PGlite.create()
    served = await serve(db, options)
    dir = tempDir('pgwasm-copy-stream-')
  })
  afterAll(async () => {
    await served?.server.stop()
    await db?.close()
  })

  const count = async (table: string) => (await db.query<{ n: number }>(`select count(*)::int as n from ${table}`)).rows[0]!.n

  /** Checks that `client`'s connection still answers a query. */
  async function stillServes(client: ThreadClient): Promise<void> {
    client.write(queryFrame('select 1'))
    expect((await client.until('Z')).map(summary)).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
  }

  /** A thread client past startup with `sql` sent and its CopyInResponse read. */
  async function copying(sql: string): Promise<ThreadClient> {
    const client = new ThreadClient(served.port)
    await client.handshake()
    client.write(queryFrame(sql))
    expect((await client.until('G')).map(summary)).toEqual(['G'])
    return client
  }

  it('loads more data than maxCopyBytes holds, every byte in place, from another thread', async () => {
    await db.exec('create table s_thread (id int, v text)')
    const client = await copying('copy s_thread from stdin')
    const rows = 60_000
    for (const f of dataFrames(rows)) client.write(f)
    client.write(copyDone())
    expect((await client.until('Z')).map(summary)).toEqual([`C COPY ${rows}`, 'Z I'])
    const { rows: digest } = await db.query<{ d: string }>(`select md5(string_agg(id || E'\\t' || v || E'\\n', '' order by id)) as d from s_thread`)
    // 12 MB: held whole, it would have failed at the 4 MB cap.
    expect(digest[0]!.d).toBe(md5(lines(1, rows)))
    client.destroy()
  })

  it.skipIf(!hasPsql)('loads a file through psql \\copy past maxCopyBytes [needs psql]', async () => {
    await db.exec('create table s_psql (id int, v text)')
    const file = join(dir, 'rows.tsv')
    writeFileSync(file, lines(1, 50_000))
    const result = await run(
      'psql',
      ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', HOST, '-p', String(served.port), '-U', 'postgres', '-d', 'postgres', '-c', `\\copy s_psql from '${file}'`],
      { timeoutMs: 120_000, env: libpqEnv() },
    )
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(await count('s_psql')).toBe(50_000)
  })

  it('runs the statements after the COPY in the same Query, with one ReadyForQuery', async () => {
    await db.exec('create table s_multi (id int, v text)')
    const client = await copying('copy s_multi from stdin; select count(*) from s_multi')
    for (const f of dataFrames(20_000)) client.write(f)
    client.write(copyDone())
    expect((await client.until('Z')).map(summary)).toEqual(['C COPY 20000', 'T', 'D', 'C SELECT 1', 'Z I'])
    await stillServes(client)
    client.destroy()
  })

  it("fails the COPY with the client's CopyFail, nothing loaded, and the connection goes on", async () => {
    await db.exec('create table s_fail (id int, v text)')
    const client = await copying('copy s_fail from stdin')
    for (const f of dataFrames(20_000)) client.write(f)
    client.write(copyFail('client gave up'))
    expect((await client.until('Z')).map(summary)).toEqual(['E 57014 COPY from stdin failed: client gave up', 'Z I'])
    expect(await count('s_fail')).toBe(0)
    await stillServes(client)
    client.destroy()
  })

  it('drops the rest of the data after a bad row, as Postgres does, and answers once', async () => {
    await db.exec('create table s_bad (id int, v text)')
    const client = await copying('copy s_bad from stdin')
    const frames = dataFrames(20_000)
    frames.splice(10, 0, copyData('not-a-number\tx\n'))
    for (const f of frames) client.write(f)
    client.write(copyDone())
    const reply = (await client.until('Z')).map(summary)
    expect(reply).toHaveLength(2)
    expect(reply[0]).toMatch(/^E 22P02 invalid input syntax for type integer: "not-a-number"/)
    expect(reply[1]).toBe('Z I')
    client.write(queryFrame('select count(*) from s_bad'))
    expect((await client.until('Z')).map(summary)).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
    expect(await count('s_bad')).toBe(0)
    client.destroy()
  })

  it('fails a COPY whose data stops for copyStallMs, drops what comes after, and answers a client that asked meanwhile', async () => {
    await db.exec('create table s_stall (id int, v text)')
    const other = new ThreadClient(served.port)
    await other.handshake()
    const client = await copying('copy s_stall from stdin')
    for (const f of dataFrames(10_000)) client.write(f)
    const started = performance.now()
    // Sent while the COPY holds the engine: it runs once the COPY has failed.
    other.write(queryFrame('select 2'))
    const reply = (await client.until('Z')).map(summary)
    expect(performance.now() - started).toBeGreaterThanOrEqual(350)
    expect(reply).toEqual([`E 57014 COPY from stdin failed: no COPY data for 400 ms while the COPY held the engine (the server's copyStallMs)`, 'Z I'])
    // The rest of its data comes late: dropped, up to its CopyDone.
    for (const f of dataFrames(100)) client.write(f)
    client.write(copyDone())
    client.write(queryFrame('select 42'))
    expect((await client.until('Z')).map(summary)).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
    expect(await count('s_stall')).toBe(0)
    const answer = await other.until('Z')
    expect(answer.map(summary)).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
    expect(answer[1]!.body.toString('utf8', 6)).toBe('2')
    client.destroy()
    other.destroy()
  })

  it('rolls the COPY back when the client leaves in the middle, and the server goes on', async () => {
    await db.exec('create table s_left (id int, v text)')
    const client = await copying('copy s_left from stdin')
    for (const f of dataFrames(10_000)) client.write(f)
    client.destroy()
    await client.closed
    const next = new ThreadClient(served.port)
    await next.handshake()
    next.write(queryFrame('select count(*) from s_left'))
    const reply = await next.until('Z')
    expect(reply.map(summary)).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
    expect(reply[1]!.body.toString('utf8', 6)).toBe('0')
    next.destroy()
  })

  it('ends the connection on another message in the middle of the data (08P01), nothing loaded', async () => {
    await db.exec('create table s_proto (id int, v text)')
    const client = await copying('copy s_proto from stdin')
    for (const f of dataFrames(10_000)) client.write(f)
    client.write(queryFrame('select 1'))
    const reply = (await client.rest()).map(summary)
    expect(reply.slice(-2)).toEqual([
      'E 08P01 unexpected message type 0x51 during COPY from stdin',
      'E 08P01 terminating connection because protocol synchronization was lost',
    ])
    expect(await count('s_proto')).toBe(0)
  })

  it('ends the connection on a malformed frame in the middle of the data (08P01), nothing loaded, others served', async () => {
    await db.exec('create table s_frame (id int, v text)')
    const client = await copying('copy s_frame from stdin')
    for (const f of dataFrames(10_000)) client.write(f)
    // A CopyData frame whose length is below the 4-byte minimum.
    client.write(Buffer.from([0x64, 0, 0, 0, 2]))
    const reply = (await client.rest()).map(summary)
    expect(reply.at(-1)).toBe('E 08P01 invalid message length 2')
    expect(await count('s_frame')).toBe(0)
    const next = new ThreadClient(served.port)
    await next.handshake()
    next.write(queryFrame('select 7'))
    expect((await next.until('Z')).map(summary)).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
    next.destroy()
  })
})

describe('COPY FROM STDIN with copyStallMs 0', () => {
  let db: PGlite
  let served: Served
  beforeAll(async () => {
    db = await PGlite.create()
    served = await serve(db, { maxCopyBytes: 4 * 1024 * 1024, copyStallMs: 0 })
  })
  afterAll(async () => {
    await served?.server.stop()
    await db?.close()
  })

  it('holds the data until CopyDone: past maxCopyBytes the COPY fails with 57014', async () => {
    await db.exec('create table h (id int, v text)')
    const client = new ThreadClient(served.port)
    await client.handshake()
    client.write(queryFrame('copy h from stdin'))
    await client.until('G')
    for (const f of dataFrames(60_000)) client.write(f)
    client.write(copyDone())
    const reply = (await client.until('Z')).map(summary)
    expect(reply[0]).toMatch(/^E 57014 COPY from stdin failed: more than 4194304 bytes of COPY data before CopyDone/)
    expect(reply[1]).toBe('Z I')
    client.destroy()
  })
})
