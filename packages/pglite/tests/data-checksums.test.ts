import { execFile } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { PGlite } from '../src/index.js'
import { crc32c, withoutDataChecksums } from '../src/engine/backend/control-file.js'
import type { DataTree } from '../src/engine/files/pgdata-tree.js'

// An in-memory database starts with data checksums off (control-file.ts);
// a directory keeps them.
describe('data checksums', () => {
  const dirs: string[] = []
  const newDir = () => {
    const dir = tempDir('pgwasm-checksums-')
    dirs.push(dir)
    return join(dir, 'db')
  }
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })
  const checksums = async (db: PGlite) => (await db.query<{ data_checksums: string }>('show data_checksums')).rows[0]!.data_checksums

  it('are off in memory (clones too) and on in a directory', async () => {
    const memory = await PGlite.create()
    const dir = await PGlite.create(newDir())
    const clone = await memory.clone()
    try {
      expect(await checksums(memory)).toBe('off')
      expect(await checksums(clone)).toBe('off')
      expect(await checksums(dir)).toBe('on')
    } finally {
      await Promise.all([memory.close(), dir.close(), clone.close()])
    }
  })

  it('are off in the first in-memory database of the built package, booted from the template it ships', async () => {
    // The shipped template keeps its files in one buffer: patched by a view, it changed other files and booted with checksums on.
    const cacheDir = tempDir('pgwasm-checksums-cache-')
    dirs.push(cacheDir)
    const script = join(cacheDir, 'child.mjs')
    const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'index.js')
    writeFileSync(
      script,
      `const { PGlite } = await import(${JSON.stringify(dist)})
const db = await PGlite.create({ templateCacheDir: ${JSON.stringify(cacheDir)} })
const { rows } = await db.query("select current_setting('data_checksums') as c, (select count(*)::int from pg_class) as n, current_setting('server_version_num') as v")
await db.close()
console.log(JSON.stringify(rows[0]))
`,
    )
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [script], { timeout: 120_000 }, (err, out, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(out))),
    )
    const row = JSON.parse(stdout.trim().split('\n').pop()!) as { c: string; n: number; v: string }
    expect(row.c).toBe('off')
    expect(row.n).toBeGreaterThan(300)
    expect(row.v).toMatch(/^18/)
  }, 120_000)

  it("an in-memory database's dump opens as a directory (its pg_control is whole), data and setting intact", async () => {
    const memory = await PGlite.create()
    await memory.exec(`create table t (id int primary key, v text); insert into t select g, md5(g::text) from generate_series(1, 3000) g`)
    const dump = await memory.dumpDataDir('none')
    await memory.close()
    const path = newDir()
    const loaded = await PGlite.create(path, { loadDataDir: dump })
    expect(await checksums(loaded)).toBe('off')
    await loaded.exec(`insert into t values (3001, 'more')`)
    await loaded.close()
    const reopened = await PGlite.create(path)
    try {
      expect((await reopened.query<{ n: number; s: string }>(`select count(*)::int as n, md5(string_agg(v, '' order by id)) as s from t where id <= 3000`)).rows[0]).toEqual({
        n: 3000,
        s: (await reopened.query<{ s: string }>(`select md5(string_agg(md5(g::text), '' order by g)) as s from generate_series(1, 3000) g`)).rows[0]!.s,
      })
      expect((await reopened.query<{ v: string }>('select v from t where id = 3001')).rows).toEqual([{ v: 'more' }])
    } finally {
      await reopened.close()
    }
  })

  it('change only the version field and the CRC of a real pg_control, and leave one they do not know alone', async () => {
    const path = newDir()
    await (await PGlite.create(path)).close()
    const control = new Uint8Array(readFileSync(join(path, 'global', 'pg_control')))
    const tree: DataTree = [
      { path: 'global', mode: 0o40700, mtimeMs: 0 },
      { path: 'global/pg_control', mode: 0o100600, mtimeMs: 0, data: control },
    ]
    const patched = withoutDataChecksums(tree)[1]!.data!
    // PG 18's ControlFileData on wasm32: data_checksum_version at byte 252, the CRC of bytes 0-291 at 292.
    const u32 = (bytes: Uint8Array, at: number) => new DataView(bytes.buffer, bytes.byteOffset).getUint32(at, true)
    expect(u32(control, 252)).toBe(1)
    expect(u32(control, 292)).toBe(crc32c(control.subarray(0, 292)))
    expect(u32(patched, 252)).toBe(0)
    expect(u32(patched, 292)).toBe(crc32c(patched.subarray(0, 292)))
    const changed = [...patched.keys()].filter((i) => patched[i] !== control[i])
    expect(changed.every((i) => (i >= 252 && i < 256) || (i >= 292 && i < 296))).toBe(true)
    // The template a package ships keeps every file in one buffer (a Buffer, whose slice() is a view): none of it is written.
    const shared = Buffer.alloc(3 * 8192, 0x5a)
    control.forEach((b, i) => (shared[8192 + i] = b))
    const before = Buffer.from(shared)
    const inShared: DataTree = [tree[0]!, { ...tree[1]!, data: shared.subarray(8192, 2 * 8192) }]
    const fromShared = withoutDataChecksums(inShared)[1]!.data!
    expect(shared.equals(before)).toBe(true)
    expect(Buffer.from(fromShared).equals(Buffer.from(patched))).toBe(true)
    // Already off, or not a layout it knows: the same tree back.
    const off: DataTree = [tree[0]!, { ...tree[1]!, data: patched }]
    expect(withoutDataChecksums(off)).toBe(off)
    const garbled: DataTree = [tree[0]!, { ...tree[1]!, data: control.map((b, i) => (i < 64 ? b ^ 0xff : b)) }]
    expect(withoutDataChecksums(garbled)).toBe(garbled)
  })
})
