import { createHash, randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { crc32, gunzip } from 'node:zlib'
import { mkdir, open, readdir, readFile, rename, stat, unlink, utimes } from 'node:fs/promises'
import { homedir, tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { pidExists } from './process-alive.js'

/**
 * Where templates live: `PGWASM_CACHE_DIR`, else `node_modules/.cache/pgwasm`
 * of the working directory when node_modules exists, else the OS cache dir.
 */
export async function defaultCacheDir(): Promise<string> {
  const fromEnv = process.env.PGWASM_CACHE_DIR
  if (fromEnv) return resolve(fromEnv)
  const modules = resolve('node_modules')
  if (existsSync(modules)) return join(modules, '.cache', 'pgwasm')
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Caches', 'pgwasm')
  if (process.platform === 'win32') return join(process.env.LOCALAPPDATA ?? tmpdir(), 'pgwasm', 'cache')
  return join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'pgwasm')
}

/** The cache file for an entry id: `<kind>-<hash of id>.bin`. */
export async function templatePath(dir: string, id: string, kind = 'template'): Promise<string> {
  const key = createHash('sha256').update(id).digest('hex').slice(0, 24)
  return join(dir, `${kind}-${key}.bin`)
}

/**
 * What precedes an entry's body: its length and its CRC-32 (u32 LE each).
 * The check finds a torn or damaged file; it is no defence against a writer
 * of the cache folder, which could write a matching SHA-256 as easily. It
 * replaced a SHA-256 that took ~28 ms of each process's first create (a
 * 50 MB snapshot); CRC-32 reads it in ~8 ms.
 */
export const CHECK_BYTES = 8

function checkOf(body: Uint8Array): Buffer {
  const check = Buffer.alloc(CHECK_BYTES)
  check.writeUInt32LE(body.byteLength, 0)
  check.writeUInt32LE(crc32(body), 4)
  return check
}

/**
 * The stored bytes after the check, or undefined when the file is missing,
 * short or damaged (a damaged file is removed so it gets rebuilt).
 */
export async function readVerified(file: string): Promise<Uint8Array | undefined> {
  let bytes: Buffer
  try {
    bytes = await readWhole(file)
  } catch {
    return undefined
  }
  if (bytes.byteLength >= CHECK_BYTES) {
    const body = bytes.subarray(CHECK_BYTES)
    if (checkOf(body).equals(bytes.subarray(0, CHECK_BYTES))) {
      // The modification time orders entries for eviction: a used one is recent.
      const now = new Date()
      await utimes(file, now, now).catch(() => {})
      // A plain Uint8Array view: Buffer's slice() would not copy (see copyBytes).
      return new Uint8Array(body.buffer, body.byteOffset, body.byteLength)
    }
  }
  await unlink(file).catch(() => {})
  return undefined
}

/**
 * The file's bytes in one read: `readFile` reads 512 kB at a time, each
 * piece a turn of this thread, so a 40 MB snapshot read while the thread
 * makes an engine module (a new process's first restore) waited ~80 turns
 * behind it, and the engine binary (9 MB) read while extensions were
 * being prepared waited behind their work.
 */
export async function readWhole(file: string): Promise<Buffer> {
  const handle = await open(file, 'r')
  try {
    const { size } = await handle.stat()
    const bytes = Buffer.allocUnsafeSlow(size)
    let at = 0
    while (at < size) {
      const { bytesRead } = await handle.read(bytes, at, size - at, at)
      if (bytesRead === 0) break
      at += bytesRead
    }
    return bytes.subarray(0, at)
  } finally {
    await handle.close()
  }
}

/**
 * Where the package build puts the cache entries it made (the default
 * start-up snapshot): dist/engine/ beside the bundle, gzipped, under the
 * entry's own file name. Absent when running from source.
 */
const SHIPPED_ENTRIES = './engine/'

/**
 * A cache entry the package ships, for a cache that lacks it (a first run
 * after install): its body, checked as a cached one is, and `keep`, which
 * copies it into the cache in the background once the caller found it good
 * (later processes then read it without inflating it). Inflated on libuv's
 * threads, beside the engine's compile. Undefined when the package ships
 * no such entry, or a damaged one.
 */
export async function readShipped(dir: string, file: string): Promise<{ body: Uint8Array; keep(): void } | undefined> {
  let whole: Buffer
  try {
    const gz = await readFile(fileURLToPath(new URL(`${SHIPPED_ENTRIES}${basename(file)}.gz`, import.meta.url)))
    // One output chunk of the size the gzip trailer gives: at zlib's default 16 kB a chunk, the ~34 MB took ~2,000 trips to this thread (~350 ms, not ~60).
    const size = gz.byteLength >= 4 ? gz.readUInt32LE(gz.byteLength - 4) : 0
    whole = await promisify(gunzip)(gz, { chunkSize: Math.max(64 * 1024, size + 1) })
  } catch {
    return undefined
  }
  // gunzip checked the bytes against the gzip member's own CRC-32: the entry's check need not be computed again.
  if (whole.byteLength < CHECK_BYTES || whole.readUInt32LE(0) !== whole.byteLength - CHECK_BYTES) return undefined
  const body = whole.subarray(CHECK_BYTES)
  return {
    body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
    keep: () =>
      whenIdle(async () => {
        // The process may have written its own meanwhile (the shipped one did not restore, and Postgres booted): that one stays.
        if (await stat(file).then(() => true, () => false)) return
        await writeParts(dir, file, [whole.subarray(0, CHECK_BYTES), body]).catch(() => {
          // An unwritable cache: every process inflates the shipped entry again.
        })
      }),
  }
}

/** How long a copy into the cache waits for the create that read the shipped entry, unless the process ends first. */
const COPY_DELAY_MS = 1000

/**
 * Runs `work` once, after {@link COPY_DELAY_MS} or when the process is about
 * to exit, whichever is first: the ~34 MB write does not compete with the
 * first create, and a script that ends at once still leaves it behind.
 */
function whenIdle(work: () => Promise<void>): void {
  let done = false
  const run = (): void => {
    if (done) return
    done = true
    clearTimeout(timer)
    process.off('beforeExit', run)
    void work()
  }
  const timer = setTimeout(run, COPY_DELAY_MS)
  timer.unref()
  process.once('beforeExit', run)
}

/**
 * Writes check + body to a private temp file, then renames it into place:
 * readers see a whole entry or none, and two processes filling the cache at
 * once each rename a complete file.
 */
export async function writeAtomically(dir: string, file: string, body: Uint8Array): Promise<void> {
  await writeParts(dir, file, [checkOf(body), body])
}

async function writeParts(dir: string, file: string, [check, body]: [Uint8Array, Uint8Array]): Promise<void> {
  await mkdir(dir, { recursive: true })
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  try {
    // Two writes, not one of a concatenation: that would copy the ~50 MB body once more.
    const handle = await open(temp, 'w')
    try {
      const { bytesWritten } = await handle.writev([check, body])
      if (bytesWritten !== check.byteLength + body.byteLength) throw new Error(`short write to ${temp}`)
    } finally {
      await handle.close()
    }
    await rename(temp, file)
  } catch (err) {
    await unlink(temp).catch(() => {})
    throw err
  }
  await pruneCache(dir, file).catch(() => {
    // A cache that cannot be pruned still works; it only takes more room.
  })
}

/** Cache size above which the least recently used entries go: `PGWASM_CACHE_MAX_MB`, 200 MB by default. */
export function cacheBudgetBytes(): number {
  const mb = Number(process.env.PGWASM_CACHE_MAX_MB)
  return (Number.isFinite(mb) && mb > 0 ? mb : 200) * 1024 * 1024
}

/** A temporary file no writer can still finish: this old, or its writer's process is gone. */
const ORPHAN_AGE_MS = 60 * 60 * 1000

/**
 * Removes temporary files whose writer died mid-write (a killed process
 * leaves one behind each time), then the least recently used entries while
 * the cache is over its budget. `keep` (the entry just written) always stays.
 */
export async function pruneCache(dir: string, keep: string): Promise<void> {
  const now = Date.now()
  const entries: { file: string; size: number; mtime: number }[] = []
  for (const name of await readdir(dir)) {
    const file = join(dir, name)
    const info = await stat(file).catch(() => undefined)
    if (!info?.isFile()) continue
    const temp = /\.(\d+)\.[0-9a-f]+\.tmp$/.exec(name)
    if (temp) {
      const pid = Number(temp[1])
      if (now - info.mtimeMs > ORPHAN_AGE_MS || (pid !== process.pid && !pidExists(pid))) await unlink(file).catch(() => {})
      continue
    }
    if (/^(template|snapshot)-[0-9a-f]+\.bin$/.test(name)) entries.push({ file, size: info.size, mtime: info.mtimeMs })
  }
  let total = entries.reduce((sum, e) => sum + e.size, 0)
  const budget = cacheBudgetBytes()
  for (const e of entries.sort((a, b) => a.mtime - b.mtime)) {
    if (total <= budget) break
    if (e.file === keep) continue
    await unlink(e.file).catch(() => {})
    total -= e.size
  }
}
