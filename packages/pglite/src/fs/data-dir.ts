import { DataDirLockedError, EngineError } from '../errors.js'

/** Where a database lives, from the `dataDir` argument. */
export type DataDirSpec =
  | { readonly kind: 'memory' }
  | { readonly kind: 'node'; readonly path: string }
  | { readonly kind: 'idb'; readonly name: string }

/**
 * `undefined`, `''` and `memory://...` are in memory; `file://path` and plain
 * paths are directories (Node only); `idb://name` lives in IndexedDB (browser).
 */
export function parseDataDir(dataDir: string | undefined): DataDirSpec {
  if (!dataDir || dataDir.startsWith('memory://')) return { kind: 'memory' }
  if (dataDir.startsWith('idb://')) {
    const name = dataDir.slice('idb://'.length)
    if (!name) throw new EngineError('`idb://` needs a name, e.g. idb://my-app', { code: 'BAD_DATA_DIR' })
    if (typeof indexedDB === 'undefined') {
      throw new EngineError(`\`${dataDir}\` needs IndexedDB (a browser); in Node use a directory path or memory://`, { code: 'BAD_DATA_DIR' })
    }
    return { kind: 'idb', name }
  }
  if (dataDir.startsWith('opfs-ahp://')) {
    throw new EngineError(`\`${dataDir}\`: OPFS data directories are not supported; use idb://<name> in a browser`, { code: 'BAD_DATA_DIR' })
  }
  const path = dataDir.startsWith('file://') ? dataDir.slice('file://'.length) : dataDir
  if (!path) throw new EngineError('`file://` needs a path', { code: 'BAD_DATA_DIR' })
  return { kind: 'node', path }
}

/** Directories open in this process, by resolved path. */
const openDirs = new Set<string>()

/** Claims `path` for one instance of this process; throws if another has it. */
export function claimDir(path: string): () => void {
  if (openDirs.has(path)) {
    throw new DataDirLockedError(`the data directory ${path} is already open in this process; close that instance first`, {
      path,
      holder: 'this process',
    })
  }
  openDirs.add(path)
  let released = false
  return () => {
    if (released) return
    released = true
    openDirs.delete(path)
  }
}
