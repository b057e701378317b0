import { createHash } from 'node:crypto'
import { openAsBlob } from 'node:fs'
import { truncate, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { PGlite } from '../src/index.js'
import { STREAM_FROM, streamedInput } from '../src/engine/files/blob-input.js'

// A Blob past STREAM_FROM is read by `/dev/blob` as the engine asks for it,
// from a thread streaming it, not copied whole first.
const ROWS = 60_000
const PAD = 'p'.repeat(300)
const text = Array.from({ length: ROWS }, (_, i) => `${i + 1}\t${PAD}${i % 97}\n`).join('')
const bytes = new TextEncoder().encode(text)
/** The Blob in many parts: its stream yields a chunk per part, so reads cross chunks and seeks go back past them. */
const inParts = () => new Blob(Array.from({ length: 40 }, (_, i) => bytes.subarray(Math.floor((i * bytes.byteLength) / 40), Math.floor(((i + 1) * bytes.byteLength) / 40))))
const md5 = (data: Uint8Array | string) => createHash('md5').update(data).digest('hex')

describe('COPY from a Blob read as a stream', () => {
  let db: PGlite
  let dir: string
  beforeAll(async () => {
    expect(bytes.byteLength).toBeGreaterThan(STREAM_FROM)
    db = await PGlite.create()
    dir = tempDir('pgwasm-blob-')
  })
  afterAll(async () => {
    await db.close()
  })

  const tableDigest = async (table: string) =>
    (await db.query<{ n: number; d: string }>(`select count(*)::int as n, md5(string_agg(id || E'\\t' || v || E'\\n', '' order by id)) as d from ${table}`)).rows[0]

  it('loads every byte of a Blob made of many parts', async () => {
    await db.exec('create table s1 (id int, v text)')
    await db.query(`copy s1 from '/dev/blob'`, [], { blob: inParts() })
    expect(await tableDigest('s1')).toEqual({ n: ROWS, d: md5(text) })
  })

  it('is read by the streaming reader, at any offset, and not when small or file-backed', async () => {
    const input = streamedInput(inParts())
    expect(input).toBeDefined()
    try {
      const at = (position: number, length: number) => {
        const into = new Uint8Array(length + 3)
        const n = input!.read(into, 3, length, position)
        return into.subarray(3, 3 + n)
      }
      expect(input!.size).toBe(bytes.byteLength)
      expect(md5(at(0, 1_000_000))).toBe(md5(bytes.subarray(0, 1_000_000)))
      expect(md5(at(bytes.byteLength - 10, 100))).toBe(md5(bytes.subarray(bytes.byteLength - 10)))
      expect(at(bytes.byteLength, 100).byteLength).toBe(0)
      expect(md5(at(bytes.byteLength - 3_000_000, 2_000_000))).toBe(md5(bytes.subarray(bytes.byteLength - 3_000_000, bytes.byteLength - 1_000_000)))
      expect(md5(at(12345, 4_000_000))).toBe(md5(bytes.subarray(12345, 4_012_345)))
    } finally {
      input!.close()
    }
    expect(() => input!.read(new Uint8Array(1), 0, 1, 0)).toThrow(/no longer readable/)
    expect(streamedInput(new Blob([bytes.subarray(0, STREAM_FROM - 1)]))).toBeUndefined()
    const file = join(dir, 'rows.tsv')
    await writeFile(file, bytes)
    expect(streamedInput(await openAsBlob(file))).toBeUndefined()
  })

  it('loads a file Blob (fs.openAsBlob), read whole', async () => {
    const file = join(dir, 'rows.tsv')
    await writeFile(file, bytes)
    await db.exec('create table s2 (id int, v text)')
    await db.query(`copy s2 from '/dev/blob'`, [], { blob: await openAsBlob(file) })
    expect(await tableDigest('s2')).toEqual({ n: ROWS, d: md5(text) })
  })

  it('reads the Blob again from the start for a second COPY in the same call', async () => {
    await db.exec('create table s3 (id int, v text); create table s4 (id int, v text)')
    await db.exec(`copy s3 from '/dev/blob'; copy s4 from '/dev/blob'`, { blob: inParts() })
    expect(await tableDigest('s3')).toEqual({ n: ROWS, d: md5(text) })
    expect(await tableDigest('s4')).toEqual({ n: ROWS, d: md5(text) })
  })

  it('serves reads at any offset, backwards too', async () => {
    const late = bytes.byteLength - 5000
    const { rows } = await db.query<{ a: string; b: string; c: string }>(
      `select md5(pg_read_binary_file('/dev/blob', ${late}, 4000)) as a,
              md5(pg_read_binary_file('/dev/blob', 7, 3000)) as b,
              md5(pg_read_binary_file('/dev/blob', ${late}, 100000)) as c`,
      [],
      { blob: inParts() },
    )
    expect(rows[0]).toEqual({ a: md5(bytes.subarray(late, late + 4000)), b: md5(bytes.subarray(7, 3007)), c: md5(bytes.subarray(late)) })
  })

  it('a Blob that cannot be read fails the call, and the database goes on', async () => {
    // A file Blob whose file changed after it was opened is no longer readable.
    const file = join(dir, 'changed.tsv')
    await writeFile(file, bytes)
    const blob = await openAsBlob(file)
    await truncate(file, 10)
    await db.exec('create table s5 (id int, v text)')
    await expect(db.query(`copy s5 from '/dev/blob'`, [], { blob })).rejects.toThrow(/could not be read/)
    expect((await db.query<{ n: number }>('select count(*)::int as n from s5')).rows).toEqual([{ n: 0 }])
    await db.query(`copy s5 from '/dev/blob'`, [], { blob: new Blob([bytes]) })
    expect(await tableDigest('s5')).toEqual({ n: ROWS, d: md5(text) })
  })

  it('two databases read their own Blobs fed at the same time', async () => {
    const other = await PGlite.create()
    try {
      const otherText = text.replaceAll('p', 'q')
      await db.exec('create table s6 (id int, v text)')
      await other.exec('create table s6 (id int, v text)')
      await Promise.all([
        db.query(`copy s6 from '/dev/blob'`, [], { blob: inParts() }),
        other.query(`copy s6 from '/dev/blob'`, [], { blob: new Blob([otherText]) }),
      ])
      expect(await tableDigest('s6')).toEqual({ n: ROWS, d: md5(text) })
      const theirs = await other.query<{ d: string }>(`select md5(string_agg(id || E'\\t' || v || E'\\n', '' order by id)) as d from s6`)
      expect(theirs.rows[0]!.d).toBe(md5(otherText))
    } finally {
      await other.close()
    }
  })
})
