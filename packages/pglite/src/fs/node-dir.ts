import { mkdir, readdir, rm, stat, unlink, utimes, writeFile, chmod } from 'node:fs/promises'
import { join } from 'node:path'
import { EngineError } from '../errors.js'
import { isDirEntry, type DataTree } from '../engine/pgdata-tree.js'

/** Written before a new cluster is copied in, removed after: its presence means a half-made directory. */
const INIT_MARKER = '.pgwasm-initializing'

/**
 * Makes `path` hold a cluster: reuses an existing one as is, else copies the
 * template in (redoing a copy a crash left half done). Returns whether it
 * created the cluster.
 */
export async function prepareNodeDataDir(path: string, template: () => Promise<DataTree>): Promise<boolean> {
  await mkdir(path, { recursive: true, mode: 0o700 })
  const names = await readdir(path)
  if (names.includes(INIT_MARKER)) {
    for (const name of names) await rm(join(path, name), { recursive: true, force: true })
  } else if (names.includes('PG_VERSION')) {
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
