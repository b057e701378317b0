import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHash } from 'node:crypto'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { PGlite } from '../src/index.js'

// A real collection before each heap sample (what `node --expose-gc` gives),
// so the samples measure live objects rather than when the collector last ran.
setFlagsFromString('--expose-gc')
const collectGarbage = runInNewContext('gc') as () => void

function liveHeapBytes(): number {
  collectGarbage()
  collectGarbage()
  return process.memoryUsage().heapUsed
}

const md5 = (data: string | Uint8Array): string => createHash('md5').update(data).digest('hex')

describe('a 100,000-row result', () => {
  const sql = 'select g, md5(g::text) from generate_series(1, 100000) g'
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
  })
  afterAll(() => db.close())

  /** Count of rows that are not `{ g: i + 1, md5: md5(String(i + 1)) }` in order (md5 checked on every 997th row). */
  function wrongRows(rows: readonly { g: number; md5: string }[]): number {
    let wrong = 0
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]!
      if (row.g !== i + 1 || row.md5.length !== 32) wrong++
      else if (i % 997 === 0 && row.md5 !== md5(String(i + 1))) wrong++
    }
    return wrong
  }

  it('comes back complete and in order through query()', async () => {
    const { rows } = await db.query<{ g: number; md5: string }>(sql)
    expect(rows).toHaveLength(100_000)
    expect(wrongRows(rows)).toBe(0)
    expect(rows[99_999]).toEqual({ g: 100_000, md5: md5('100000') })
  })

  it('comes back complete and in order through exec()', async () => {
    const [result] = await db.exec(sql)
    const rows = result!.rows as { g: number; md5: string }[]
    expect(rows).toHaveLength(100_000)
    expect(wrongRows(rows)).toBe(0)
    expect(rows[99_999]).toEqual({ g: 100_000, md5: md5('100000') })
  })

  it('can be garbage-collected once the caller drops it, before the next call', async () => {
    let rows: unknown[] | undefined = (await db.query(sql)).rows
    const dropped = new WeakRef(rows)
    rows = undefined
    // A WeakRef keeps its target until the current job ends.
    await new Promise((resolve) => setImmediate(resolve))
    collectGarbage()
    expect(dropped.deref() === undefined, 'the dropped rows are still reachable from the instance').toBe(true)
  })
})

describe('a 64 MiB bytea parameter', () => {
  const SIZE = 64 * 1024 * 1024
  let db: PGlite
  let sent: Uint8Array

  /** A 32-bit FNV-1a over the 32-bit words: a change in any byte shows. */
  function checksum(bytes: Uint8Array): number {
    const words = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2)
    let h = 0x811c9dc5
    for (let i = 0; i < words.length; i++) h = Math.imul(h ^ words[i]!, 0x01000193)
    return h >>> 0
  }

  beforeAll(async () => {
    sent = new Uint8Array(SIZE)
    // xorshift32: incompressible, so TOAST stores all 64 MiB.
    const words = new Uint32Array(sent.buffer)
    let x = 0x9e3779b9
    for (let i = 0; i < words.length; i++) {
      x ^= x << 13
      x ^= x >>> 17
      x ^= x << 5
      words[i] = x >>> 0
    }
    db = await PGlite.create()
    await db.exec('create table blobs (id int primary key, b bytea)')
    await db.query('insert into blobs values (1, $1)', [sent])
  })
  afterAll(() => db.close())

  it('is stored byte for byte: the server computes the same length and md5', async () => {
    const { rows } = await db.query<{ n: number; m: string }>('select length(b) as n, md5(b) as m from blobs where id = 1')
    expect(rows).toEqual([{ n: SIZE, m: md5(sent) }])
  })

  it('reads back with the same length, sampled bytes and checksum', async () => {
    const { rows } = await db.query<{ b: Uint8Array }>('select b from blobs where id = 1')
    const back = rows[0]!.b
    expect(back).toBeInstanceOf(Uint8Array)
    expect(back.byteLength).toBe(SIZE)
    const offsets = [0, 1, 2, 3, 4095, 4096, 8191, SIZE >>> 1, SIZE - 2, SIZE - 1]
    for (let i = 1; i <= 32; i++) offsets.push(Math.floor((SIZE - 1) * (i / 33)) + i)
    expect(offsets.map((o) => back[o])).toEqual(offsets.map((o) => sent[o]))
    expect(checksum(back)).toBe(checksum(sent))
  })
})

describe("a 50 MB COPY FROM '/dev/blob'", () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec('create table copied (id int, label text, amount numeric)')
  })
  afterAll(() => db.close())

  it('loads every row of the CSV', async () => {
    // ~1 KB lines: quoted fields with doubled quotes and commas, and a numeric column.
    const filler = 'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(27)
    const lines: string[] = []
    let bytes = 0
    let rowsWritten = 0
    let idSum = 0
    while (bytes < 50_000_000) {
      const id = rowsWritten + 1
      const line = `${id},"row ${id} ""quoted"", ${filler}",${id % 1000}.${id % 97}\n`
      lines.push(line)
      bytes += line.length
      rowsWritten++
      idSum += id
    }
    const csv = lines.join('')
    const result = await db.query("copy copied from '/dev/blob' with (format csv)", [], { blob: new Blob([csv]) })
    expect(result.affectedRows).toBe(rowsWritten)
    const { rows } = await db.query<{ n: number; s: string; l: string }>(
      'select count(*)::int as n, sum(id)::text as s, max(label) filter (where id = 2) as l from copied',
    )
    expect(rows).toEqual([{ n: rowsWritten, s: String(idSum), l: `row 2 "quoted", ${filler}` }])
  })
})

describe('100,000 small queries after a 1,000-query warm-up', () => {
  const WARM_UP = 1_000
  const MEASURED = 100_000
  let db: PGlite
  let wrongAnswers = 0
  let before: { heap: number; wasm: number }
  let after: { heap: number; wasm: number }

  /** One step of the mix: mostly `select $1::int`, a tenth inserts, a tenth reads back. */
  async function step(i: number): Promise<void> {
    if (i % 10 === 3) {
      await db.query('insert into tiny (n) values ($1)', [i])
    } else if (i % 10 === 7) {
      const { rows } = await db.query<{ n: number }>('select n from tiny where id = (select max(id) from tiny)')
      if (rows[0]?.n !== i - 4) wrongAnswers++
    } else {
      const { rows } = await db.query<{ n: number }>('select $1::int as n', [i])
      if (rows[0]?.n !== i) wrongAnswers++
    }
  }

  function sample(): { heap: number; wasm: number } {
    return { heap: liveHeapBytes(), wasm: db._internalStats().wasmMemoryBytes }
  }

  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec('create table tiny (id serial primary key, n int)')
    for (let i = 0; i < WARM_UP; i++) await step(i)
    before = sample()
    for (let i = WARM_UP; i < WARM_UP + MEASURED; i++) await step(i)
    after = sample()
  }, 120_000)
  afterAll(() => db.close())

  it('answers every query correctly', () => {
    expect(wrongAnswers).toBe(0)
  })

  it('does not grow WASM memory', () => {
    expect(after.wasm).toBe(before.wasm)
  })

  it('keeps the live JS heap within 8 MB of the warm-up sample', () => {
    expect(after.heap - before.heap).toBeLessThan(8 * 1024 * 1024)
  })
})
