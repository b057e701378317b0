import { DataDirLockedError, EngineError, IncompatibleDataDirError } from '../errors.js'
import { CHUNK_BYTES, isZero, type FsChanges } from '../engine/files/memfs-journal.js'
import { isDirEntry, type DataTree, type TreeEntry } from '../engine/files/pgdata-tree.js'
import { decodeTreeImage, imageOf } from '../engine/files/tree-image.js'

/**
 * Layout of the IndexedDB database, also its IndexedDB version. 1: files
 * and non-zero chunks. 2: adds a base image (the tree a new database
 * started from, tree-image.ts, not compressed: IndexedDB reads it off this
 * thread, an inflate would run on it); a file record marked `base` reads
 * as the base's file overlaid with its stored chunks.
 */
const STORE_FORMAT = 2
/** Postgres major version of the engine (see ENGINE_PG_MAJOR in node-dir.ts). */
const PG_MAJOR = '18'
const BASE_KEY = 'image'
/** A stored chunk of a `base` file that is all zero (where the base may not be). */
const ZERO_MARK = new Uint8Array(0)

interface FileRecord {
  mode: number
  size: number
  mtimeMs: number
  /** Starts from the base image's file of the same path; stored chunks override it. */
  base?: true
}

interface MetaRecord {
  format: number
  pgMajor: string
  engineVersion: string
}

/**
 * A data directory kept in IndexedDB (`idb://<name>`): one record per file
 * or directory (mode, size) and one per non-zero 64 kB chunk of a file, so
 * a commit stores the few chunks it changed. One IndexedDB database per
 * data directory, named `pgwasm/<name>`.
 */
export class IdbStore {
  readonly #db: IDBDatabase
  readonly #release: () => void
  readonly name: string
  /** Paths whose record is marked `base`: a zero chunk of theirs must be stored, not dropped. */
  readonly #basePaths = new Set<string>()

  private constructor(name: string, db: IDBDatabase, release: () => void) {
    this.name = name
    this.#db = db
    this.#release = release
  }

  /**
   * Opens (or creates) the store and takes the tab-wide lock on it: a second
   * tab or instance gets DataDirLockedError instead of a second writer.
   */
  static async open(name: string): Promise<IdbStore> {
    if (typeof indexedDB === 'undefined') {
      throw new EngineError(`idb://${name} needs IndexedDB (a browser); in Node use a directory path or memory://`, { code: 'BAD_DATA_DIR' })
    }
    const release = await lock(name)
    try {
      // Upgrading a format 1 store only adds the (empty) base store: its data reads as before.
      const db = await request(indexedDB.open(`pgwasm/${name}`, STORE_FORMAT), (req) => {
        const db = (req as IDBOpenDBRequest).result
        for (const store of ['meta', 'files', 'chunks', 'base']) if (!db.objectStoreNames.contains(store)) db.createObjectStore(store)
      })
      return new IdbStore(name, db, release)
    } catch (err) {
      release()
      // The IndexedDB version is the store format: a newer pgwasm's store is above ours.
      if ((err as { name?: unknown } | null)?.name === 'VersionError') {
        throw new IncompatibleDataDirError(`idb://${name} was written by a newer pgwasm (a store format above ${STORE_FORMAT})`, {
          path: `idb://${name}`,
          dataDirVersion: 'unknown',
          engineVersion: PG_MAJOR,
        })
      }
      throw err instanceof EngineError ? err : new EngineError(`cannot open IndexedDB database pgwasm/${name}: ${String(err)}`, { code: 'BAD_DATA_DIR', cause: err })
    }
  }

  /** The stored data directory, or `undefined` when the store is new. */
  async load(): Promise<DataTree | undefined> {
    const tx = this.#db.transaction(['meta', 'files', 'chunks', 'base'], 'readonly')
    const [meta, paths, files, chunkKeys, chunks, image] = await Promise.all([
      request(tx.objectStore('meta').get('meta')) as Promise<MetaRecord | undefined>,
      request(tx.objectStore('files').getAllKeys()) as Promise<string[]>,
      request(tx.objectStore('files').getAll()) as Promise<FileRecord[]>,
      request(tx.objectStore('chunks').getAllKeys()) as Promise<[string, number][]>,
      request(tx.objectStore('chunks').getAll()) as Promise<Uint8Array[]>,
      request(tx.objectStore('base').get(BASE_KEY)) as Promise<Uint8Array | undefined>,
    ])
    if (!meta) return undefined
    if ((meta.format !== 1 && meta.format !== STORE_FORMAT) || meta.pgMajor !== PG_MAJOR) {
      throw new IncompatibleDataDirError(
        `idb://${this.name} was written by another pgwasm (store format ${meta.format}, PostgreSQL ${meta.pgMajor}); this one reads formats 1-${STORE_FORMAT}, PostgreSQL ${PG_MAJOR}`,
        { path: `idb://${this.name}`, dataDirVersion: meta.pgMajor, engineVersion: PG_MAJOR },
      )
    }
    const base = new Map<string, Uint8Array>()
    if (image) for (const e of decodeTreeImage(image)) if (e.data) base.set(e.path, e.data)
    const overlaid = new Set<string>()
    for (const [path] of chunkKeys) overlaid.add(path)
    const data = new Map<string, Uint8Array>()
    const entries: TreeEntry[] = paths.map((path, i) => {
      const f = files[i]!
      if ((f.mode & 0o170000) === 0o040000) return { path, mode: f.mode, mtimeMs: f.mtimeMs }
      const from = f.base ? base.get(path) : undefined
      if (f.base) {
        if (!from) throw new EngineError(`idb://${this.name}: ${path} refers to a base image that is missing`, { code: 'BAD_DATA_DIR' })
        this.#basePaths.add(path)
        // Shared with the base when nothing overrides it: files are copied on their first write.
        if (!overlaid.has(path) && f.size <= from.byteLength) return { path, mode: f.mode, mtimeMs: f.mtimeMs, data: from.subarray(0, f.size) }
      }
      const bytes = new Uint8Array(f.size)
      if (from) bytes.set(from.subarray(0, Math.min(f.size, from.byteLength)))
      data.set(path, bytes)
      return { path, mode: f.mode, mtimeMs: f.mtimeMs, data: bytes }
    })
    for (let i = 0; i < chunkKeys.length; i++) {
      const [path, index] = chunkKeys[i]!
      const target = data.get(path)
      const chunk = chunks[i]!
      const at = index * CHUNK_BYTES
      if (!target || at >= target.byteLength) continue
      if (chunk.byteLength === 0) target.fill(0, at, Math.min(target.byteLength, at + CHUNK_BYTES))
      else if (at + chunk.byteLength <= target.byteLength) target.set(chunk, at)
    }
    // Keys sort so that a directory comes before its contents ('a' < 'a/b').
    return entries.filter((e) => e.path !== 'postmaster.pid')
  }

  /**
   * Stores a whole tree into the (empty) store in one transaction: a
   * half-created database never exists. A tree decoded from an image (the
   * bundled template) is stored as that image and a record per file, its
   * distinct non-zero blocks only instead of ~30 MB of chunks: what a
   * reopen then reads.
   */
  async create(tree: DataTree, engineVersion: string): Promise<void> {
    const meta: MetaRecord = { format: STORE_FORMAT, pgMajor: PG_MAJOR, engineVersion }
    const image = imageOf(tree)
    const upserts: { path: string; mode: number; size: number; mtimeMs: number }[] = []
    const chunks: { path: string; index: number; bytes: Uint8Array | null }[] = []
    for (const entry of tree) {
      const size = isDirEntry(entry) ? 0 : (entry.data?.byteLength ?? 0)
      upserts.push({ path: entry.path, mode: entry.mode, size, mtimeMs: entry.mtimeMs })
      if (image) {
        if (!isDirEntry(entry)) this.#basePaths.add(entry.path)
        continue
      }
      for (let c = 0; c * CHUNK_BYTES < size; c++) {
        const view = entry.data!.subarray(c * CHUNK_BYTES, Math.min(size, (c + 1) * CHUNK_BYTES))
        if (!isZero(view)) chunks.push({ path: entry.path, index: c, bytes: view.slice() })
      }
    }
    await this.apply({ upserts, deletes: [], chunks }, 'strict', { meta, image })
  }

  /**
   * Applies one set of changes in one IndexedDB transaction; resolves when
   * it is committed (`strict`: on disk, not just handed to the OS).
   */
  async apply(changes: FsChanges, durability: 'strict' | 'relaxed', created?: { meta: MetaRecord; image: Uint8Array | undefined }): Promise<void> {
    const tx = this.#db.transaction(['meta', 'files', 'chunks', 'base'], 'readwrite', { durability })
    const done = new Promise<void>((resolve, reject) => {
      tx.oncomplete = () => resolve()
      tx.onabort = () => reject(tx.error ?? new Error('transaction aborted'))
      tx.onerror = () => reject(tx.error ?? new Error('transaction failed'))
    })
    const files = tx.objectStore('files')
    const chunks = tx.objectStore('chunks')
    if (created) {
      tx.objectStore('meta').put(created.meta, 'meta')
      if (created.image) tx.objectStore('base').put(created.image, BASE_KEY)
    }
    const basePaths = this.#basePaths
    const sizes = new Map<string, number>()
    for (const path of changes.deletes) {
      files.delete(path)
      chunks.delete(IDBKeyRange.bound([path, -1], [path, Infinity]))
      basePaths.delete(path)
    }
    for (const u of changes.upserts) {
      if (u.replaced) basePaths.delete(u.path)
      const record: FileRecord = { mode: u.mode, size: u.size, mtimeMs: u.mtimeMs }
      if (basePaths.has(u.path)) record.base = true
      files.put(record, u.path)
      sizes.set(u.path, u.size)
    }
    for (const c of changes.chunks) {
      if (c.index === -1) {
        // Drop chunks past the end of a shrunk (or replaced) file.
        const size = sizes.get(c.path) ?? 0
        chunks.delete(IDBKeyRange.bound([c.path, Math.ceil(size / CHUNK_BYTES)], [c.path, Infinity]))
      } else if (c.bytes) {
        chunks.put(c.bytes, [c.path, c.index])
      } else if (basePaths.has(c.path)) {
        // An absent chunk of a base file reads as the base's bytes.
        chunks.put(ZERO_MARK, [c.path, c.index])
      } else {
        chunks.delete([c.path, c.index])
      }
    }
    try {
      await done
    } catch (cause) {
      throw new EngineError(`cannot write idb://${this.name}: ${String(cause)}`, { code: 'PERSIST_FAILED', cause })
    }
  }

  close(): void {
    this.#db.close()
    this.#release()
  }
}

function request<T>(req: IDBRequest<T> | IDBOpenDBRequest, upgrade?: (req: IDBRequest) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (upgrade) (req as IDBOpenDBRequest).onupgradeneeded = () => upgrade(req)
    req.onsuccess = () => resolve(req.result as T)
    req.onerror = () => reject(req.error)
    if ('onblocked' in req) req.onblocked = () => reject(new Error('blocked by an older connection in another tab'))
  })
}

/** How long an open waits for another holder of the same database to let go. */
const LOCK_WAIT_MS = 3000

/** Locks held by this page, for runtimes without Web Locks (one page, no second tab to guard against). */
const heldHere = new Set<string>()

/**
 * Takes the Web Lock of this data directory (waiting up to LOCK_WAIT_MS): across tabs of
 * an origin only one instance may write it. `scheme` is the data directory's (`idb`, `opfs-ahp`).
 */
export async function lock(name: string, scheme = 'idb'): Promise<() => void> {
  const key = scheme === 'idb' ? `pgwasm:idb:${name}` : `pgwasm:${scheme}:${name}`
  const holderError = () =>
    new DataDirLockedError(`${scheme}://${name} is open in another tab or instance; close it there first`, { path: `${scheme}://${name}`, holder: 'another tab or instance' })
  if (heldHere.has(key)) throw holderError()
  const locks = (globalThis.navigator as { locks?: LockManager } | undefined)?.locks
  heldHere.add(key)
  if (!locks) return () => heldHere.delete(key)
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  // Not `ifAvailable`: a reloaded page's previous document lets go of its
  // lock a moment after the new one asks. Another live tab keeps it.
  const granted = await new Promise<boolean>((resolve) => {
    locks
      .request(key, { signal: AbortSignal.timeout(LOCK_WAIT_MS) }, () => {
        resolve(true)
        return held
      })
      .catch(() => resolve(false))
  })
  if (!granted) {
    heldHere.delete(key)
    throw holderError()
  }
  return () => {
    heldHere.delete(key)
    release()
  }
}
