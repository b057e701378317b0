import { describe, expect, it } from 'vitest'
import { copyWritten } from '../src/engine/files/pgdata-tree.js'
import { PGlite } from '../src/index.js'

/** A mostly zero array with a few written stretches, like a WAL segment partly filled. */
function sparse(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length)
  let x = seed
  for (let run = 0; run < 12; run++) {
    x = (x * 1103515245 + 12345) >>> 0
    const at = x % length
    for (let i = at; i < Math.min(length, at + 1 + (x % 3000)); i++) out[i] = (i * 31 + run) & 0xff || 1
  }
  out[length - 1] = 7
  return out
}

describe('copy on first write of a shared file', () => {
  it('copies every byte of a sparse file, aligned or not, whole or a prefix', () => {
    for (const [length, offset] of [[1 << 20, 0], [(1 << 20) + 12345, 3], [600_000, 1]] as const) {
      const backing = new Uint8Array(length + offset + 64)
      backing.set(sparse(length, length), offset)
      const bytes = backing.subarray(offset, offset + length)
      for (const used of [length, length - 70_000, 300_000]) {
        const copy = copyWritten(bytes, used)
        expect(copy.byteLength).toBe(used)
        expect(Buffer.from(copy).equals(Buffer.from(bytes.subarray(0, used)))).toBe(true)
        copy[0] = copy[0]! ^ 0xff
        expect(bytes[0]).not.toBe(copy[0])
      }
    }
  })

  it('keeps a database that wrote the shared WAL segment recoverable and the template untouched', async () => {
    const db = await PGlite.create()
    await db.exec(`create table t (id int primary key, a text); insert into t select g, md5(g::text) from generate_series(1, 5000) g`)
    // A copy made from files (not memory) replays the written WAL from the copied segment.
    const dump = await db.dumpDataDir('none')
    const reopened = await PGlite.create({ loadDataDir: dump })
    expect((await reopened.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n).toBe(5000)
    const fresh = await PGlite.create()
    expect((await fresh.query<{ n: number }>(`select count(*)::int as n from pg_tables where tablename = 't'`)).rows[0]!.n).toBe(0)
    await Promise.all([db.close(), reopened.close(), fresh.close()])
  }, 60_000)
})

describe('in-memory files that grow', () => {
  it('keeps every byte of a table written past its buffer pool, through a dump and a clone', async () => {
    const db = await PGlite.create()
    // In-memory databases run with a 32 MB pool: a 60 MB table is written to
    // the file system 8 kB at a time and read back from it.
    expect((await db.query<{ shared_buffers: string }>('show shared_buffers')).rows[0]!.shared_buffers).toBe('32MB')
    await db.exec(`create table big (id int primary key, a text); insert into big select g, repeat(md5(g::text), 6) from generate_series(1, 250000) g`)
    const sizeOf = async (d: PGlite) => (await d.query<{ n: number }>(`select pg_relation_size('big')::float8 as n`)).rows[0]!.n
    expect(await sizeOf(db)).toBeGreaterThan(48 * 1024 * 1024)
    const digest = `select md5(string_agg(a, ',' order by id)) as h, count(*)::int as n from big`
    const expected = (await db.query<{ h: string; n: number }>(digest)).rows[0]!
    expect(expected.n).toBe(250000)
    const copy = await db.clone()
    const reopened = await PGlite.create({ loadDataDir: await db.dumpDataDir('none') })
    for (const other of [copy, reopened]) expect((await other.query<{ h: string; n: number }>(digest)).rows[0]).toEqual(expected)
    await Promise.all([db.close(), copy.close(), reopened.close()])
  }, 120_000)
})
