import { execFile, spawn } from 'node:child_process'
import { crc32 } from 'node:zlib'
import { existsSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { tempDir as makeTempDir } from '@pgwasm/test-support/temp-dirs'
import { PGlite } from '../src/index.js'
import { clearTemplateMemory, templateKey } from '../src/engine/start/template.js'
import { clearSnapshotMemory } from '../src/engine/start/starter.js'
import { CHECK_BYTES, readVerified, templatePath, writeAtomically } from '../src/engine/start/template-disk.js'
import { decodeSnapshot, encodeSnapshot } from '../src/engine/start/snapshot-codec.js'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..', '..')
const tempDir = (): string => makeTempDir('pgwasm-cache-')

function forgetProcessCaches(): void {
  clearTemplateMemory()
  clearSnapshotMemory()
}

async function selectOne(cacheDir: string): Promise<void> {
  const db = await PGlite.create({ templateCacheDir: cacheDir })
  expect((await db.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  await db.close()
}

/** Whether a cache entry's leading length and CRC-32 match the bytes after it. */
function isWhole(entry: Buffer): boolean {
  const body = entry.subarray(CHECK_BYTES)
  return entry.readUInt32LE(0) === body.byteLength && entry.readUInt32LE(4) === crc32(body)
}

/**
 * Flips the last byte of a cache entry, which lies in file data (or tar
 * padding): the entry still decodes, and only its check shows the damage.
 */
function corrupt(file: string): void {
  const bytes = readFileSync(file)
  bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0xff
  writeFileSync(file, bytes)
}

/** Starts a first database with an empty `cacheDir` and returns the snapshot entry it saves (in the background). */
async function firstSnapshotEntry(cacheDir: string): Promise<string> {
  forgetProcessCaches()
  await selectOne(cacheDir)
  // The entry itself, not the temporary file it is written to first.
  const isSnapshotEntry = (f: string): boolean => f.startsWith('snapshot-') && f.endsWith('.bin')
  await expect.poll(() => readdirSync(cacheDir).some(isSnapshotEntry), { timeout: 20_000 }).toBe(true)
  return join(cacheDir, readdirSync(cacheDir).find(isSnapshotEntry)!)
}

describe('template and snapshot disk cache', () => {
  it('gives a different cache file to a different engine version or initdb arguments', async () => {
    const dir = '/cache'
    const a = await templatePath(dir, templateKey({ engineVersion: 'pglite-0.5.16' }))
    const b = await templatePath(dir, templateKey({ engineVersion: 'pglite-0.5.17' }))
    const c = await templatePath(dir, templateKey({ engineVersion: 'pglite-0.5.16' }, { initdbArgs: ['--no-data-checksums'] }))
    expect(new Set([a, b, c]).size).toBe(3)
  })

  it('rebuilds a corrupt template entry instead of using it', async () => {
    const cacheDir = tempDir()
    forgetProcessCaches()
    await selectOne(cacheDir)
    // The snapshot is written in the background after the first start.
    await expect.poll(() => readdirSync(cacheDir).filter((f) => f.endsWith('.bin')).length, { timeout: 20_000 }).toBe(2)
    const template = join(cacheDir, readdirSync(cacheDir).find((f) => f.startsWith('template-') && f.endsWith('.bin'))!)
    const snapshot = join(cacheDir, readdirSync(cacheDir).find((f) => f.startsWith('snapshot-') && f.endsWith('.bin'))!)
    corrupt(template)
    rmSync(snapshot)
    forgetProcessCaches()
    await selectOne(cacheDir)
    expect(isWhole(readFileSync(template))).toBe(true)
  })

  it('rejects a corrupt snapshot entry, starts from the template and writes a whole snapshot again', async () => {
    const cacheDir = tempDir()
    const snapshot = await firstSnapshotEntry(cacheDir)
    corrupt(snapshot)
    const corrupted = readFileSync(snapshot)
    expect(isWhole(corrupted)).toBe(false)
    forgetProcessCaches()
    await selectOne(cacheDir)
    // Rejected (removed on read) and rebuilt by the start that booted instead:
    // the entry is whole again, and not the bytes that were corrupted.
    await expect.poll(() => existsSync(snapshot) && isWhole(readFileSync(snapshot)), { timeout: 20_000 }).toBe(true)
    expect(readFileSync(snapshot).equals(corrupted)).toBe(false)
  })

  it('leaves the all-zero chunks of files out of a snapshot entry, and a database started from it writes past them', async () => {
    const cacheDir = tempDir()
    const file = await firstSnapshotEntry(cacheDir)
    const stored = readFileSync(file)
    const body = new Uint8Array(stored.buffer, stored.byteOffset + CHECK_BYTES, stored.byteLength - CHECK_BYTES)
    const snap = decodeSnapshot(body)
    const files = snap.dirs.flatMap((d) => d.tree.filter((e) => e.data))
    const wal = files.find((e) => /pg_wal\/[0-9A-F]{24}$/.test(e.path))!
    expect(wal.data!.byteLength).toBe(16 * 1024 * 1024)
    // The segment is mostly zeros and is not stored as such.
    const whole = snap.chunkBytes.byteLength + files.reduce((n, e) => n + e.data!.byteLength, 0)
    expect(body.byteLength).toBeLessThan(whole - 8 * 1024 * 1024)
    // Decoding and encoding again gives the same bytes: nothing was lost or moved.
    expect(Buffer.from(encodeSnapshot(snap)).equals(Buffer.from(body))).toBe(true)

    // A new process's first database starts from this entry (read, not rewritten) and fills its WAL past the stored chunks.
    const { ino } = statSync(file)
    utimesSync(file, 1_000_000, 1_000_000)
    forgetProcessCaches()
    const db = await PGlite.create({ templateCacheDir: cacheDir })
    try {
      await db.exec(`create table t as select g as id, repeat('w', 500) as v from generate_series(1, 40000) g`)
      await db.exec(`insert into t select g, repeat('v', 500) from generate_series(40001, 80000) g`)
      expect((await db.query<{ n: number; s: string }>(`select count(*)::int as n, sum(length(v))::text as s from t`)).rows).toEqual([{ n: 80000, s: '40000000' }])
    } finally {
      await db.close()
    }
    expect(statSync(file).ino).toBe(ino)
    expect(statSync(file).mtimeMs).toBeGreaterThan(1_000_000_000)
  })

  it('lets two processes fill one cache at once, leaving whole entries and no temporary files', async () => {
    const cacheDir = tempDir()
    const script = join(cacheDir, 'child.mts')
    writeFileSync(
      script,
      `import { PGlite } from ${JSON.stringify(join(root, 'packages/pglite/src/index.ts'))}
const db = await PGlite.create({ templateCacheDir: ${JSON.stringify(cacheDir)} })
const { rows } = await db.query('select 40 + 2 as n')
await db.close()
// No wait for the snapshot written in the background: its pending file
// operations keep this process alive until the entry is renamed into place.
console.log(rows[0].n)
`,
    )
    const tsx = join(root, 'node_modules', '.bin', 'tsx')
    const run = (): Promise<string> =>
      new Promise((resolve, reject) => {
        execFile(tsx, [script], { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(stdout.trim())))
      })
    expect(await Promise.all([run(), run()])).toEqual(['42', '42'])
    const files = readdirSync(cacheDir).filter((f) => f !== 'child.mts')
    expect(files.filter((f) => f.endsWith('.tmp'))).toEqual([])
    expect(files.filter((f) => f.startsWith('template-'))).toHaveLength(1)
    expect(files.filter((f) => f.startsWith('snapshot-'))).toHaveLength(1)
    for (const f of files.filter((name) => name.endsWith('.bin'))) expect(isWhole(readFileSync(join(cacheDir, f))), f).toBe(true)
    // Both entries are whole: a third process starts from them.
    expect(await run()).toBe('42')
  }, 180_000)

  it('removes temporary files of writers that died, keeps those of live ones, and evicts the least recently used entries over PGWASM_CACHE_MAX_MB', async () => {
    const dir = tempDir()
    const entry = (name: string) => join(dir, name)
    const mb = new Uint8Array(1024 * 1024)
    // Three 1 MB entries, oldest first; then the oldest is read, which makes it the most recent.
    for (const [i, name] of ['snapshot-aa.bin', 'snapshot-bb.bin', 'template-cc.bin'].entries()) {
      await writeAtomically(dir, entry(name), mb)
      utimesSync(entry(name), 1_000_000 + i, 1_000_000 + i)
    }
    expect(await readVerified(entry('snapshot-aa.bin'))).toHaveLength(mb.length)
    // A writer that was killed (its process is gone) and one still writing.
    const dead = spawn('true')
    await new Promise((resolve) => dead.on('exit', resolve))
    const live = spawn('sleep', ['60'])
    writeFileSync(entry(`snapshot-dd.bin.${dead.pid}.0a0b0c0d.tmp`), mb)
    writeFileSync(entry(`snapshot-dd.bin.${live.pid}.0a0b0c0d.tmp`), mb)
    const previous = process.env.PGWASM_CACHE_MAX_MB
    process.env.PGWASM_CACHE_MAX_MB = '2.5'
    try {
      await writeAtomically(dir, entry('snapshot-ee.bin'), mb)
    } finally {
      if (previous === undefined) delete process.env.PGWASM_CACHE_MAX_MB
      else process.env.PGWASM_CACHE_MAX_MB = previous
      live.kill()
    }
    // 4 entries of 1 MB over a 2.5 MB budget: the two least recently used went; the one just written and the one just read stay.
    expect(readdirSync(dir).sort()).toEqual([`snapshot-aa.bin`, `snapshot-dd.bin.${live.pid}.0a0b0c0d.tmp`, 'snapshot-ee.bin'].sort())
    expect(statSync(entry('snapshot-aa.bin')).mtimeMs).toBeGreaterThan(Date.now() - 60_000)
  })
})
