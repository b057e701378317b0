import { DataDirLockedError, EngineError } from '../errors.js'

/** Where a database lives, from the `dataDir` argument. */
export type DataDirSpec =
  | { readonly kind: 'memory' }
  | { readonly kind: 'node'; readonly path: string }
  /** A journaled in-memory database kept in IndexedDB (`idb://`) or in the origin private file system (`opfs-ahp://`). */
  | { readonly kind: 'journaled'; readonly name: string; readonly scheme: 'idb' | 'opfs-ahp' }

/**
 * `undefined`, `''` and `memory://...` are in memory; `file://path` and plain
 * paths are directories (Node only); `idb://name` lives in IndexedDB (browser).
 * @throws TypeError when `dataDir` is not a string; EngineError
 *   `BAD_DATA_DIR` for an unknown or unsupported scheme.
 */
export function parseDataDir(dataDir: unknown): DataDirSpec {
  if (dataDir !== undefined && typeof dataDir !== 'string') {
    throw new TypeError(`\`dataDir\` must be a string (a path, or a \`file://\`, \`memory://\`, \`idb://\` or \`opfs-ahp://\` URL), got ${describeValue(dataDir)}`)
  }
  if (!dataDir || dataDir.startsWith('memory://')) return { kind: 'memory' }
  if (dataDir.startsWith('idb://')) {
    const name = dataDir.slice('idb://'.length)
    if (!name) throw new EngineError('`idb://` needs a name, e.g. idb://my-app', { code: 'BAD_DATA_DIR' })
    if (typeof indexedDB === 'undefined') {
      throw new EngineError(`\`${dataDir}\` needs IndexedDB (a browser); in Node use a directory path or memory://`, { code: 'BAD_DATA_DIR' })
    }
    return { kind: 'journaled', name, scheme: 'idb' }
  }
  if (dataDir.startsWith('opfs-ahp://')) {
    const name = dataDir.slice('opfs-ahp://'.length)
    if (!name) throw new EngineError('`opfs-ahp://` needs a name, e.g. opfs-ahp://my-app', { code: 'BAD_DATA_DIR' })
    return { kind: 'journaled', name, scheme: 'opfs-ahp' }
  }
  // A typo or a URL of another kind would otherwise become a folder named
  // `foo:` in the working directory. One letter is a Windows drive (`C://x`).
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]+):\/\//.exec(dataDir)
  if (scheme && !dataDir.startsWith('file://')) {
    throw new EngineError(
      `\`dataDir\` \`${dataDir}\` has the unknown scheme \`${scheme[1]}://\`; supported: a path or \`file://<path>\` (Node), \`memory://\`, \`idb://<name>\` (browser), \`opfs-ahp://<name>\` (browser worker)`,
      { code: 'BAD_DATA_DIR' },
    )
  }
  const path = dataDir.startsWith('file://') ? dataDir.slice('file://'.length) : dataDir
  if (!path) throw new EngineError('`file://` needs a path', { code: 'BAD_DATA_DIR' })
  return { kind: 'node', path }
}

/**
 * The options `new PGlite(dataDir, options)` runs with: `dataDir` from either
 * place (the first argument may also be the options object).
 * @throws TypeError for a `dataDir` that is not a string (or arguments of the
 *   wrong kind); EngineError `BAD_DATA_DIR` for an unknown scheme, or for two
 *   different data directories (the argument and `options.dataDir`).
 */
export function resolveDataDirOptions<O extends { dataDir?: string }>(dataDir: unknown, options: O | undefined): O {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new TypeError(`\`options\` must be an object, got ${describeValue(options)}`)
  }
  if (Array.isArray(dataDir)) throw new TypeError(`\`dataDir\` must be a string or an options object, got an Array`)
  if (typeof URL !== 'undefined' && dataDir instanceof URL) {
    throw new TypeError(`\`dataDir\` must be a string, got the URL ${dataDir.href}; pass its \`href\``)
  }
  if (dataDir === null || dataDir === undefined) {
    parseDataDir(options?.dataDir)
    return { ...options } as O
  }
  if (typeof dataDir === 'object') {
    parseDataDir((dataDir as O).dataDir)
    return dataDir as O
  }
  const spec = parseDataDir(dataDir)
  const other = options?.dataDir
  if (other !== undefined && other !== dataDir && !sameSpec(spec, parseDataDir(other))) {
    throw new EngineError(
      `two data directories: \`${String(dataDir)}\` as the first argument and \`${other}\` as \`options.dataDir\`; pass one`,
      { code: 'BAD_DATA_DIR' },
    )
  }
  return { ...options, dataDir } as O
}

function sameSpec(a: DataDirSpec, b: DataDirSpec): boolean {
  if (a.kind === 'memory') return b.kind === 'memory'
  if (a.kind === 'journaled') return b.kind === 'journaled' && a.name === b.name && a.scheme === b.scheme
  return b.kind === 'node' && normalizePath(a.path) === normalizePath(b.path)
}

/**
 * `./db/`, `db` and `<cwd>/db` name one directory. Pure string work: this
 * module also runs in browsers, where there is no `node:path`.
 */
function normalizePath(path: string): string {
  const isNode = typeof process !== 'undefined' && typeof process.cwd === 'function'
  const windows = isNode && process.platform === 'win32'
  let p = windows ? path.replace(/\\/g, '/') : path
  if (isNode && !p.startsWith('/') && !(windows && /^[A-Za-z]:/.test(p))) p = `${process.cwd().replace(/\\/g, '/')}/${p}`
  const parts: string[] = []
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..') parts.pop()
    else parts.push(part)
  }
  const joined = parts.join('/')
  return windows ? joined.toLowerCase() : joined
}

function describeValue(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'string') return `the string \`${value}\``
  if (typeof value === 'object' || typeof value === 'function') return `a ${value.constructor?.name ?? typeof value}`
  return `${typeof value} ${String(value)}`
}

/** A directory held by one instance of this process. */
export interface DirClaim {
  /** What releases the directory's lock file; run if the holder is garbage-collected without close(). */
  setUnlock(unlock: () => Promise<void>): void
  release(): void
}

interface Held {
  /** Weak, so that an instance dropped without close() can still be collected. */
  readonly owner: WeakRef<object>
  /** Closes the owner; its later calls reject with ClosedError giving the reason. */
  readonly yieldDir: (owner: object, reason: string) => Promise<void>
  unlock: (() => Promise<void>) | undefined
}

/** Directories open in this process, by resolved path. */
const openDirs = new Map<string, Held>()

/** How long an instance being taken over may take to close before the new open gives up. */
const YIELD_TIMEOUT_MS = 30_000

// An instance dropped without close() frees its directory when collected:
// its lock file goes, and the next open runs crash recovery.
const collected = new FinalizationRegistry<{ path: string; held: Held }>(({ path, held }) => {
  if (openDirs.get(path) === held) openDirs.delete(path)
  void held.unlock?.().catch(() => {})
})

/**
 * Claims `path` for `holder`. Another instance of this process that has it
 * open is closed first, as PGlite code that reopens a directory without
 * closing (to simulate a restart) expects; its later calls reject with
 * ClosedError saying why. Two live instances never write one directory.
 * @throws DataDirLockedError when the other instance does not close in time.
 */
export async function claimDir<T extends object>(path: string, owner: T, yieldDir: (owner: T, reason: string) => Promise<void>): Promise<DirClaim> {
  for (let held = openDirs.get(path); held; held = openDirs.get(path)) {
    const previous = held.owner.deref()
    if (!previous) {
      // Collected, its finalizer not run yet: its lock is stale.
      openDirs.delete(path)
      await held.unlock?.().catch(() => {})
      continue
    }
    let timer: ReturnType<typeof setTimeout> | undefined
    const closed = await Promise.race([
      held.yieldDir(previous, `another instance in this process opened ${path}`).then(
        () => true,
        () => true,
      ),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), YIELD_TIMEOUT_MS))),
    ])
    clearTimeout(timer)
    if (!closed || openDirs.get(path) === held) {
      throw new DataDirLockedError(`the data directory ${path} is open in this process and that instance did not close; close it first`, {
        path,
        holder: 'this process',
      })
    }
  }
  const held: Held = { owner: new WeakRef(owner), yieldDir: yieldDir as Held['yieldDir'], unlock: undefined }
  openDirs.set(path, held)
  collected.register(owner, { path, held }, held)
  let released = false
  return {
    setUnlock: (unlock) => {
      held.unlock = unlock
    },
    release: () => {
      if (released) return
      released = true
      collected.unregister(held)
      if (openDirs.get(path) === held) openDirs.delete(path)
    },
  }
}
