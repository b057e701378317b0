import { createHash, randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises'
import { homedir, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

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
 * The stored bytes after the digest, or undefined when the file is missing,
 * short or corrupt (a corrupt file is removed so it gets rebuilt).
 */
export async function readVerified(file: string, digestBytes: number): Promise<Uint8Array | undefined> {
  let bytes: Buffer
  try {
    bytes = await readFile(file)
  } catch {
    return undefined
  }
  if (bytes.byteLength > digestBytes) {
    const body = bytes.subarray(digestBytes)
    const digest = createHash('sha256').update(body).digest()
    // A plain Uint8Array view: Buffer's slice() would not copy (see copyBytes).
    if (digest.equals(bytes.subarray(0, digestBytes))) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength)
  }
  await unlink(file).catch(() => {})
  return undefined
}

/**
 * Writes digest + body to a private temp file, then renames it into place:
 * readers see a whole entry or none, and two processes filling the cache at
 * once each rename a complete file.
 */
export async function writeAtomically(dir: string, file: string, body: Uint8Array, digestBytes: number): Promise<void> {
  await mkdir(dir, { recursive: true })
  const digest = createHash('sha256').update(body).digest()
  if (digest.byteLength !== digestBytes) throw new Error('digest size mismatch')
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  try {
    await writeFile(temp, Buffer.concat([digest, body]))
    await rename(temp, file)
  } catch (err) {
    await unlink(temp).catch(() => {})
    throw err
  }
}
