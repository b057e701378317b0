import { EngineError, IncompatibleDataDirError } from '../errors.js'
import { CHUNK_BYTES, type FsChanges } from '../engine/files/memfs-journal.js'
import { isDirEntry, type DataTree, type TreeEntry } from '../engine/files/pgdata-tree.js'
import { decodeTreeImage, treeImageParts } from '../engine/files/tree-image.js'
import { lock } from './idb-store.js'

/**
 * A data directory kept in the origin private file system
 * (`opfs-ahp://<name>`), written through synchronous access handles, so
 * only inside a dedicated worker. One file per generation, `gen-<n>`: a
 * record holding the whole tree as an image (tree-image.ts), then one record
 * per flush with what it changed. A record is [magic, kind, length, crc32,
 * payload]; a flush is one record, so it is all there or, torn by a crash,
 * fails its check and is left out with everything after it. When a
 * generation's journal grows past {@link COMPACT_BYTES} and past its image,
 * the next generation starts from an image of the tree in memory (MEMFS, read
 * in place: no copy of the database is made) and the old file goes.
 */

const MAGIC = 0x4a574750 // 'PGWJ'
const HEADER_BYTES = 13
const KIND_IMAGE = 1
const KIND_CHANGES = 2
const STORE_FORMAT = 1
/** Postgres major version of the engine (see ENGINE_PG_MAJOR in node-dir.ts). */
const PG_MAJOR = '18'
/**
 * The journal size (after a generation's image) past which a flush starts a
 * new generation from an image: at least this, and at least the image's own
 * size, so that a large database is not rewritten every flush (the image
 * writes cost at most what the journal wrote) and a reopen replays at most
 * about twice the database.
 */
const COMPACT_BYTES = 16 * 1024 * 1024

interface Meta {
  format: number
  pgMajor: string
  engineVersion: string
}

/** What a changes record's JSON head holds; chunk bytes follow it in order. */
interface ChangesHead {
  upserts: FsChanges['upserts']
  deletes: FsChanges['deletes']
  /** [path, index, byte length]; length -1: an all-zero (dropped) chunk. */
  chunks: [string, number, number][]
}

/** The synchronous access handle of a dedicated worker (lib.dom may lack its sync signatures). */
interface SyncHandle {
  read(buffer: Uint8Array, options: { at: number }): number
  write(buffer: Uint8Array, options: { at: number }): number
  getSize(): number
  truncate(size: number): void
  flush(): void
  close(): void
}
type FileHandle = FileSystemFileHandle & { createSyncAccessHandle?: () => Promise<SyncHandle> }

/** A file's state while records are replayed. */
interface Replayed {
  mode: number
  mtimeMs: number
  data: Uint8Array | undefined
}

export class OpfsStore {
  readonly name: string
  readonly #dir: FileSystemDirectoryHandle
  readonly #release: () => void
  #generation = 0
  #handle: SyncHandle | undefined
  /** Where the next record goes (the end of the last valid one). */
  #end = 0
  /** Where the generation's image record ends (its journal starts). */
  #imageEnd = 0
  #meta: Meta | undefined
  /**
   * The whole tree as it is now (at least every applied flush in it), or
   * undefined when it cannot be trusted; set by its user. Read in place, so
   * written out before anything else runs.
   */
  currentTree: (() => DataTree | undefined) | undefined

  private constructor(name: string, dir: FileSystemDirectoryHandle, release: () => void) {
    this.name = name
    this.#dir = dir
    this.#release = release
  }

  /** Opens (or creates) the store's folder and takes the tab-wide lock on it. */
  static async open(name: string): Promise<OpfsStore> {
    const storage = (globalThis.navigator as { storage?: { getDirectory?: () => Promise<FileSystemDirectoryHandle> } } | undefined)?.storage
    if (!storage?.getDirectory) {
      // A browser without it (WebKitGTK's, or a page that is not a secure context) is told what to use instead.
      const inBrowser = typeof (globalThis as { indexedDB?: unknown }).indexedDB !== 'undefined'
      throw new EngineError(
        inBrowser
          ? `opfs-ahp://${name} needs the origin private file system (navigator.storage.getDirectory), which this browser does not offer here (WebKitGTK has none; other browsers only in a secure context): use idb://${name}`
          : `opfs-ahp://${name} needs the origin private file system (a browser); in Node use a directory path or memory://`,
        { code: 'BAD_DATA_DIR' },
      )
    }
    if (typeof (globalThis as { FileSystemSyncAccessHandle?: unknown }).FileSystemSyncAccessHandle === 'undefined') {
      throw new EngineError(`opfs-ahp://${name} needs a dedicated worker (synchronous access handles): open it in a PGliteWorker's worker, or use idb://${name} on the page`, { code: 'BAD_DATA_DIR' })
    }
    const release = await lock(name, 'opfs-ahp')
    try {
      const root = await (await storage.getDirectory()).getDirectoryHandle('pgwasm', { create: true })
      return new OpfsStore(name, await root.getDirectoryHandle(encodeURIComponent(name), { create: true }), release)
    } catch (err) {
      release()
      throw new EngineError(`cannot open opfs-ahp://${name}: ${String(err)}`, { code: 'BAD_DATA_DIR', cause: err })
    }
  }

  /** The stored data directory, or `undefined` when the store is new. */
  async load(): Promise<DataTree | undefined> {
    const generations = await this.#generations()
    for (const generation of generations) {
      const handle = await this.#open(generation)
      const loaded = replay(readAll(handle))
      if (!loaded) {
        // Its image is torn: a compaction a crash interrupted. The one before it holds everything.
        handle.close()
        continue
      }
      checkMeta(this.name, loaded.meta)
      // A record a crash tore is cut off, so later ones follow the last good one.
      if (loaded.end < handle.getSize()) {
        handle.truncate(loaded.end)
        handle.flush()
      }
      this.#generation = generation
      this.#handle = handle
      this.#end = loaded.end
      this.#imageEnd = loaded.imageEnd
      this.#meta = loaded.meta
      for (const older of generations.filter((g) => g < generation)) await this.#dir.removeEntry(fileName(older)).catch(() => {})
      return loaded.tree
    }
    return undefined
  }

  /** Stores a whole tree into the (empty) store as the first generation's image. */
  async create(tree: DataTree, engineVersion: string): Promise<void> {
    this.#meta = { format: STORE_FORMAT, pgMajor: PG_MAJOR, engineVersion }
    await this.#startGeneration(1, tree)
  }

  /**
   * Appends one flush's changes as one record; `strict`: flushed to storage
   * before it resolves. A generation past its size starts again from
   * {@link currentTree}.
   */
  async apply(changes: FsChanges, durability: 'strict' | 'relaxed'): Promise<void> {
    const handle = this.#handle
    if (!handle) throw new EngineError(`opfs-ahp://${this.name} is not open`, { code: 'PERSIST_FAILED' })
    try {
      this.#end += writeRecord(handle, KIND_CHANGES, changesParts(changes), this.#end)
      if (durability === 'strict') handle.flush()
      const current = this.currentTree
      if (current && this.#end - this.#imageEnd > Math.max(COMPACT_BYTES, this.#imageEnd)) await this.#compact(current)
    } catch (cause) {
      if (cause instanceof EngineError) throw cause
      throw new EngineError(`cannot write opfs-ahp://${this.name}: ${String(cause)}`, { code: 'PERSIST_FAILED', cause })
    }
  }

  close(): void {
    try {
      this.#handle?.flush()
      this.#handle?.close()
    } finally {
      this.#handle = undefined
      this.#release()
    }
  }

  /**
   * A new generation from `current()`; the old file goes once the new image
   * is stored. A crash before that leaves the new file's image torn, and a
   * reopen reads the old generation, which holds every flush.
   */
  async #compact(current: () => DataTree | undefined): Promise<void> {
    const old = this.#generation
    const oldHandle = this.#handle!
    const handle = await this.#open(old + 1)
    // The tree is read after the last await: its views stay valid while it is written.
    const tree = current()
    if (!tree) {
      handle.close()
      return
    }
    this.#writeImage(handle, tree)
    this.#handle = handle
    this.#generation = old + 1
    oldHandle.close()
    await this.#dir.removeEntry(fileName(old)).catch(() => {})
  }

  async #startGeneration(generation: number, tree: DataTree): Promise<void> {
    const handle = await this.#open(generation)
    this.#writeImage(handle, tree)
    this.#handle = handle
    this.#generation = generation
  }

  #writeImage(handle: SyncHandle, tree: DataTree): void {
    handle.truncate(0)
    const length = writeRecord(handle, KIND_IMAGE, [...jsonPart(this.#meta!), ...treeImageParts(tree)], 0)
    handle.flush()
    this.#end = length
    this.#imageEnd = length
  }

  async #open(generation: number): Promise<SyncHandle> {
    const file = (await this.#dir.getFileHandle(fileName(generation), { create: true })) as FileHandle
    return file.createSyncAccessHandle!()
  }

  /** Generation numbers present, newest first. */
  async #generations(): Promise<number[]> {
    const found: number[] = []
    for await (const name of (this.#dir as unknown as { keys(): AsyncIterable<string> }).keys()) {
      const match = /^gen-(\d+)$/.exec(name)
      if (match) found.push(Number(match[1]))
    }
    return found.sort((a, b) => b - a)
  }
}

function fileName(generation: number): string {
  return `gen-${generation}`
}

function checkMeta(name: string, meta: Meta): void {
  if (meta.format !== STORE_FORMAT || meta.pgMajor !== PG_MAJOR) {
    throw new IncompatibleDataDirError(
      `opfs-ahp://${name} was written by another pgwasm (store format ${meta.format}, PostgreSQL ${meta.pgMajor}); this one reads format ${STORE_FORMAT}, PostgreSQL ${PG_MAJOR}`,
      { path: `opfs-ahp://${name}`, dataDirVersion: meta.pgMajor, engineVersion: PG_MAJOR },
    )
  }
}

function readAll(handle: SyncHandle): Uint8Array {
  const bytes = new Uint8Array(handle.getSize())
  handle.read(bytes, { at: 0 })
  return bytes
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** Writes one record of `parts` at `at`, part by part (no copy of them is made); returns its byte length. */
function writeRecord(handle: SyncHandle, kind: number, parts: readonly Uint8Array[], at: number): number {
  let length = 0
  let crc = CRC_START
  for (const p of parts) {
    length += p.byteLength
    crc = crcUpdate(crc, p)
  }
  const header = new Uint8Array(HEADER_BYTES)
  const view = new DataView(header.buffer)
  view.setUint32(0, MAGIC, true)
  header[4] = kind
  view.setUint32(5, length, true)
  view.setUint32(9, crcEnd(crc), true)
  writeAll(handle, header, at)
  let offset = at + HEADER_BYTES
  for (const p of parts) {
    writeAll(handle, p, offset)
    offset += p.byteLength
  }
  return HEADER_BYTES + length
}

/** A sync handle's `write` may write less than asked (a full disk): what is left is retried, and none written is an error. */
function writeAll(handle: SyncHandle, bytes: Uint8Array, at: number): void {
  let done = 0
  while (done < bytes.byteLength) {
    const n = handle.write(bytes.subarray(done), { at: at + done })
    if (n <= 0) throw new Error(`wrote ${done} of ${bytes.byteLength} bytes at ${at} (storage full?)`)
    done += n
  }
}

/** A JSON part, preceded by its byte length. */
function jsonPart(value: unknown): Uint8Array[] {
  const json = encoder.encode(JSON.stringify(value))
  const length = new Uint8Array(4)
  new DataView(length.buffer).setUint32(0, json.byteLength, true)
  return [length, json]
}

function changesParts(changes: FsChanges): Uint8Array[] {
  const chunks: [string, number, number][] = []
  const data: Uint8Array[] = []
  for (const c of changes.chunks) {
    chunks.push([c.path, c.index, c.bytes ? c.bytes.byteLength : -1])
    if (c.bytes) data.push(c.bytes)
  }
  const head: ChangesHead = { upserts: changes.upserts, deletes: changes.deletes, chunks }
  return [...jsonPart(head), ...data]
}

/** The records of a generation's file: the tree they make and where the last valid one ends; undefined when its image is not valid. */
function replay(bytes: Uint8Array): { tree: DataTree; meta: Meta; end: number; imageEnd: number } | undefined {
  const first = readRecord(bytes, 0)
  if (!first || first.kind !== KIND_IMAGE) return undefined
  const [meta, imageAt] = readJson<Meta>(first.payload, 0)
  const files = new Map<string, Replayed>()
  for (const entry of decodeTreeImage(first.payload.subarray(imageAt))) {
    files.set(entry.path, { mode: entry.mode, mtimeMs: entry.mtimeMs, data: isDirEntry(entry) ? undefined : entry.data ? entry.data.slice() : new Uint8Array(0) })
  }
  let end = first.end
  for (let next = readRecord(bytes, end); next && next.kind === KIND_CHANGES; next = readRecord(bytes, end)) {
    applyChanges(files, next.payload)
    end = next.end
  }
  const tree: TreeEntry[] = [...files.entries()]
    .filter(([path]) => path !== 'postmaster.pid')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, f]) => (f.data === undefined ? { path, mode: f.mode, mtimeMs: f.mtimeMs } : { path, mode: f.mode, mtimeMs: f.mtimeMs, data: f.data }))
  return { tree, meta, end, imageEnd: first.end }
}

function readRecord(bytes: Uint8Array, at: number): { kind: number; payload: Uint8Array; end: number } | undefined {
  if (at + HEADER_BYTES > bytes.byteLength) return undefined
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (view.getUint32(at, true) !== MAGIC) return undefined
  const length = view.getUint32(at + 5, true)
  const end = at + HEADER_BYTES + length
  if (end > bytes.byteLength) return undefined
  const payload = bytes.subarray(at + HEADER_BYTES, end)
  if (crc32(payload) !== view.getUint32(at + 9, true)) return undefined
  return { kind: bytes[at + 4]!, payload, end }
}

function readJson<T>(bytes: Uint8Array, at: number): [T, number] {
  const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(at, true)
  return [JSON.parse(decoder.decode(bytes.subarray(at + 4, at + 4 + length))) as T, at + 4 + length]
}

/** One flush's changes, as IdbStore.apply stores them, onto the replayed files. */
function applyChanges(files: Map<string, Replayed>, payload: Uint8Array): void {
  const [head, dataAt] = readJson<ChangesHead>(payload, 0)
  for (const path of head.deletes) files.delete(path)
  const S_IFDIR = 0o040000
  for (const u of head.upserts) {
    const dir = (u.mode & 0o170000) === S_IFDIR
    const current = files.get(u.path)
    let data: Uint8Array | undefined
    if (!dir) {
      const old = u.replaced ? undefined : current?.data
      data = new Uint8Array(u.size)
      if (old) data.set(old.subarray(0, Math.min(old.byteLength, u.size)))
    }
    files.set(u.path, { mode: u.mode, mtimeMs: u.mtimeMs, data })
  }
  let at = dataAt
  for (const [path, index, length] of head.chunks) {
    const target = files.get(path)?.data
    const offset = index * CHUNK_BYTES
    if (length >= 0) {
      if (target && index >= 0 && offset < target.byteLength) target.set(payload.subarray(at, at + Math.min(length, target.byteLength - offset)), offset)
      at += length
    } else if (target && index >= 0 && offset < target.byteLength) {
      target.fill(0, offset, Math.min(target.byteLength, offset + CHUNK_BYTES))
    }
  }
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
})()

const CRC_START = 0xffffffff

/** CRC-32 over several parts: `crcEnd(crcUpdate(crcUpdate(CRC_START, a), b))`. */
function crcUpdate(state: number, bytes: Uint8Array): number {
  let c = state
  for (let i = 0; i < bytes.byteLength; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8)
  return c
}

function crcEnd(state: number): number {
  return (state ^ 0xffffffff) >>> 0
}

function crc32(bytes: Uint8Array): number {
  return crcEnd(crcUpdate(CRC_START, bytes))
}
