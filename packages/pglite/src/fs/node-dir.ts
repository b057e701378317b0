import { mkdir, readdir, readFile, realpath, rm, stat, unlink, utimes, writeFile, chmod } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { EngineError, IncompatibleDataDirError } from '../errors.js'
import { isDirEntry, type DataTree } from '../engine/files/pgdata-tree.js'
import { LOCK_FILE, lockDataDir } from './dir-lock.js'
import { makeDirs } from './make-dirs.js'

/** PostgreSQL major version of the pinned engine (docs/engine.md; keep in sync). */
export const ENGINE_PG_MAJOR = '18'

/** Written before a new cluster is copied in, removed after: its presence means a half-made directory. */
const INIT_MARKER = '.pgwasm-initializing'

/**
 * The absolute path of `path` with every symlink resolved, for as much of it
 * as exists: the engine cannot mount a symlink, and two paths to one
 * directory must name one directory.
 */
export async function canonicalDir(path: string): Promise<string> {
  const absolute = resolve(path)
  const real = await realpath(absolute).catch(() => undefined)
  if (real !== undefined) return real
  const parent = dirname(absolute)
  return parent === absolute ? absolute : join(await canonicalDir(parent), basename(absolute))
}

/**
 * Makes `path` hold a cluster: reuses an existing one as is, else copies the
 * template in (redoing a copy a crash left half done). Returns whether it
 * created the cluster.
 */
export async function prepareNodeDataDir(
  path: string,
  template: () => Promise<DataTree>,
): Promise<{ created: boolean; unlock: () => Promise<void> }> {
  await makeDirs(path, 0o700)
  const unlock = await lockDataDir(path)
  try {
    return { created: await prepareLocked(path, template), unlock }
  } catch (err) {
    await unlock()
    throw err
  }
}

async function prepareLocked(path: string, template: () => Promise<DataTree>): Promise<boolean> {
  const names = (await readdir(path)).filter((n) => n !== LOCK_FILE)
  if (names.includes(INIT_MARKER)) {
    // A copy a crash interrupted: never half-used, redone from scratch.
    for (const name of names) await rm(join(path, name), { recursive: true, force: true })
  } else if (names.includes('PG_VERSION')) {
    const version = (await readFile(join(path, 'PG_VERSION'), 'utf8')).trim()
    if (version !== ENGINE_PG_MAJOR) {
      throw new IncompatibleDataDirError(
        `the data directory ${path} is from PostgreSQL ${version}; this engine is PostgreSQL ${ENGINE_PG_MAJOR} (dump it with that version's tools and load the dump)`,
        { path, dataDirVersion: version, engineVersion: ENGINE_PG_MAJOR },
      )
    }
    // A pid file left by a killed process would make Postgres refuse to start;
    // this process holds the directory, so it is stale.
    if (names.includes('postmaster.pid')) await unlink(join(path, 'postmaster.pid')).catch(() => {})
    return false
  } else if (names.length > 0) {
    throw new EngineError(`the data directory ${path} is not empty and holds no database (no PG_VERSION)`, {
      code: 'BAD_DATA_DIR',
    })
  }
  const tree = await template()
  await writeFile(join(path, INIT_MARKER), '')
  let version: Uint8Array | undefined
  for (const entry of tree) {
    const target = join(path, entry.path)
    if (isDirEntry(entry)) {
      await mkdir(target, { recursive: true, mode: entry.mode & 0o777 })
    } else if (entry.path === 'PG_VERSION') {
      version = entry.data
    } else {
      await writeFile(target, entry.data ?? new Uint8Array(0), { mode: entry.mode & 0o777 })
      await utimes(target, entry.mtimeMs / 1000, entry.mtimeMs / 1000)
    }
  }
  // PG_VERSION last: a directory with it is complete.
  await writeFile(join(path, 'PG_VERSION'), version ?? new Uint8Array(0), { mode: 0o600 })
  await unlink(join(path, INIT_MARKER))
  await chmod(path, 0o700)
  return true
}

export async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  )
}

/**
 * The bytes of a cluster's relation files (`global` and every database
 * under `base`) as they are now; 0 where there is no cluster yet. Sizes the
 * buffer pool of the start that follows (options.ts).
 */
export async function relationBytes(path: string): Promise<number> {
  const sizeOf = async (dir: string): Promise<number> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
    const sizes = await Promise.all(entries.filter((e) => e.isFile()).map((e) => stat(join(dir, e.name)).then((s) => s.size, () => 0)))
    return sizes.reduce((a, b) => a + b, 0)
  }
  const databases = await readdir(join(path, 'base')).catch(() => [] as string[])
  const sizes = await Promise.all([sizeOf(join(path, 'global')), ...databases.map((db) => sizeOf(join(path, 'base', db)))])
  return sizes.reduce((a, b) => a + b, 0)
}
