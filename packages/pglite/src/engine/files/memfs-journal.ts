import type { FsNode, PostgresModule, StreamWrite } from '../emscripten.js'
import type { DataTree, TreeEntry } from './pgdata-tree.js'

/**
 * Files are persisted in chunks of this size: one 8 kB page write costs one
 * chunk, not its 16 MB WAL segment. Below 64 kB, so Chromium keeps each value
 * inline instead of wrapping it in a blob file.
 */
export const CHUNK_BYTES = 32 * 1024

/** What changed under the journal's root since the last `take()`. */
export interface FsChanges {
  /**
   * Files and directories created or changed, with their current size.
   * `replaced`: the whole file is in `chunks` (it is new at this path, or
   * was resized); nothing stored before for the path describes it any more.
   */
  readonly upserts: readonly {
    readonly path: string
    readonly mode: number
    readonly size: number
    readonly mtimeMs: number
    readonly replaced?: boolean
  }[]
  /** Paths (files or directories) that are gone. */
  readonly deletes: readonly string[]
  /** Chunk contents to store; `null`: the chunk is all zero (or past the end) and is dropped. */
  readonly chunks: readonly { readonly path: string; readonly index: number; readonly bytes: Uint8Array | null }[]
}

type DirOps = Record<'mknod' | 'rename' | 'unlink' | 'rmdir' | 'symlink', (...args: unknown[]) => unknown>
type FileNodeOps = { setattr(node: FsNode, attr: { size?: number }): void }
interface MemFsTables {
  stream_ops: { write: StreamWrite }
  ops_table: { dir: { node: DirOps }; file: { node: FileNodeOps; stream: { write: StreamWrite } } } | null
}

const S_IFMT = 0o170000
const S_IFDIR = 0o040000
const S_IFREG = 0o100000

/**
 * Records which parts of a MEMFS tree change, so a persistent store writes
 * only those: written byte ranges per file (as chunk numbers), size changes,
 * and structure changes (create, rename, unlink), which trigger one tree
 * walk at the next `take()`. Hooks are shared by every journal of a module.
 */
export class MemfsJournal {
  readonly #mod: PostgresModule
  readonly #root: string
  /** Path of every file and directory as last taken. */
  #known = new Map<string, FsNode>()
  #pathOf = new Map<FsNode, string>()
  readonly #dirtyChunks = new Map<FsNode, Set<number>>()
  readonly #resized = new Set<FsNode>()
  #structureChanged = false

  constructor(mod: PostgresModule, root: string) {
    this.#mod = mod
    this.#root = root
    const walked = this.#walk()
    this.#known = walked
    for (const [path, node] of walked) this.#pathOf.set(node, path)
    installHooks(mod, this)
  }

  /** @internal called by the hooks */
  noteWrite(node: FsNode, position: number, length: number): void {
    if (length <= 0 || !this.#pathOf.has(node)) {
      if (length > 0) this.#structureChanged = true
      return
    }
    let set = this.#dirtyChunks.get(node)
    if (!set) this.#dirtyChunks.set(node, (set = new Set()))
    const last = Math.floor((position + length - 1) / CHUNK_BYTES)
    for (let c = Math.floor(position / CHUNK_BYTES); c <= last; c++) set.add(c)
  }

  /** @internal */
  noteResize(node: FsNode): void {
    this.#resized.add(node)
  }

  /** @internal */
  noteStructure(): void {
    this.#structureChanged = true
  }

  get pending(): boolean {
    return this.#structureChanged || this.#dirtyChunks.size > 0 || this.#resized.size > 0
  }

  /** Everything since the last call, as a list of store operations. */
  take(): FsChanges {
    const upserts = new Map<string, FsChanges['upserts'][number]>()
    const deletes: string[] = []
    const chunks: FsChanges['chunks'][number][] = []
    const whole = new Set<FsNode>()
    if (this.#structureChanged) {
      const now = this.#walk()
      for (const [path, node] of this.#known) {
        if (now.get(path) !== node) deletes.push(path)
      }
      for (const [path, node] of now) {
        if (this.#known.get(path) !== node) {
          upserts.set(path, meta(path, node))
          if (isFile(node)) whole.add(node)
        }
      }
      this.#known = now
      this.#pathOf = new Map([...now].map(([p, n]) => [n, p]))
      this.#structureChanged = false
    }
    // A resized file is stored whole: a store that keeps a base image
    // (idb-store.ts) must not let the base's bytes show through a range
    // that a truncate cut and a later extend zero-filled. Resizes are rare
    // (truncation, VACUUM); a relation grows by writes.
    for (const node of this.#resized) {
      const path = this.#pathOf.get(node)
      if (path !== undefined && isFile(node)) whole.add(node)
    }
    for (const node of whole) {
      const path = this.#pathOf.get(node)!
      upserts.set(path, { ...meta(path, node), replaced: true })
      for (let c = 0; c * CHUNK_BYTES < node.usedBytes; c++) chunks.push(chunkOf(path, node, c))
      // A reused path may hold a longer old file's chunks.
      chunks.push({ path, index: -1, bytes: null })
    }
    for (const [node, set] of this.#dirtyChunks) {
      const path = this.#pathOf.get(node)
      if (path === undefined || whole.has(node)) continue
      upserts.set(path, meta(path, node))
      for (const c of set) chunks.push(chunkOf(path, node, c))
    }
    this.#dirtyChunks.clear()
    this.#resized.clear()
    return { upserts: [...upserts.values()], deletes, chunks }
  }

  /**
   * The journaled directory as it is now, the file bytes as views into
   * MEMFS (no copy): valid until the engine runs again, so encode it at once.
   */
  viewTree(): DataTree {
    const out: TreeEntry[] = []
    for (const [path, node] of [...this.#walk()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (path === 'postmaster.pid') continue
      if (isDir(node)) {
        out.push({ path, mode: node.mode, mtimeMs: node.mtime })
        continue
      }
      const contents = node.contents as Uint8Array | null
      out.push({ path, mode: node.mode, mtimeMs: node.mtime, data: contents ? contents.subarray(0, node.usedBytes) : new Uint8Array(0) })
    }
    return out
  }

  #walk(): Map<string, FsNode> {
    const fs = this.#mod.FS
    const out = new Map<string, FsNode>()
    const visit = (node: FsNode, rel: string): void => {
      const entries = node.contents as Record<string, FsNode>
      for (const name of Object.keys(entries)) {
        const child = entries[name]!
        const path = rel ? `${rel}/${name}` : name
        if (isDir(child)) {
          out.set(path, child)
          visit(child, path)
        } else if (isFile(child)) {
          out.set(path, child)
        }
      }
    }
    visit(fs.lookupPath(this.#root).node, '')
    return out
  }
}

/**
 * `index: -1, bytes: null` in `chunks` means "drop every chunk of this path
 * at or past its current size" (see the store).
 */
function chunkOf(path: string, node: FsNode, index: number): FsChanges['chunks'][number] {
  const contents = node.contents as Uint8Array | null
  const start = index * CHUNK_BYTES
  const end = Math.min(start + CHUNK_BYTES, node.usedBytes)
  if (!contents || start >= end) return { path, index, bytes: null }
  const view = contents.subarray(start, end)
  if (isZero(view)) return { path, index, bytes: null }
  // A copy: the store keeps it after MEMFS writes the next change in place.
  return { path, index, bytes: view.slice() }
}

/** Whether every byte is 0 (word-wise where aligned: chunks are checked on every flush). */
export function isZero(bytes: Uint8Array): boolean {
  const words = bytes.byteOffset % 4 === 0 ? new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2) : undefined
  if (words) {
    for (let i = 0; i < words.length; i++) if (words[i] !== 0) return false
    for (let i = words.length * 4; i < bytes.byteLength; i++) if (bytes[i] !== 0) return false
    return true
  }
  for (let i = 0; i < bytes.byteLength; i++) if (bytes[i] !== 0) return false
  return true
}

function meta(path: string, node: FsNode): FsChanges['upserts'][number] {
  return { path, mode: node.mode, size: isFile(node) ? node.usedBytes : 0, mtimeMs: node.mtime }
}

function isDir(node: FsNode): boolean {
  return (node.mode & S_IFMT) === S_IFDIR
}

function isFile(node: FsNode): boolean {
  return (node.mode & S_IFMT) === S_IFREG
}

const journals = new WeakMap<PostgresModule, MemfsJournal>()

function installHooks(mod: PostgresModule, journal: MemfsJournal): void {
  const hooked = journals.has(mod)
  journals.set(mod, journal)
  if (hooked) return
  const memfs = mod.MEMFS as unknown as MemFsTables
  const tables = memfs.ops_table
  if (!tables) throw new Error('MEMFS has no ops table yet: create the tree before journaling it')
  const current = (): MemfsJournal | undefined => journals.get(mod)
  const wrapWrite = (write: StreamWrite): StreamWrite =>
    function (stream, buffer, offset, length, position, canOwn) {
      const written = write(stream, buffer, offset, length, position, canOwn)
      current()?.noteWrite(stream.node, position, written)
      return written
    }
  memfs.stream_ops.write = wrapWrite(memfs.stream_ops.write)
  tables.file.stream.write = wrapWrite(tables.file.stream.write)
  const setattr = tables.file.node.setattr
  tables.file.node.setattr = function (node, attr) {
    setattr.call(this, node, attr)
    if (attr.size !== undefined) current()?.noteResize(node)
  }
  const dirOps = tables.dir.node
  for (const op of ['mknod', 'rename', 'unlink', 'rmdir', 'symlink'] as const) {
    const original = dirOps[op]
    dirOps[op] = function (this: unknown, ...args: unknown[]) {
      const out = original.apply(this, args)
      current()?.noteStructure()
      return out
    }
  }
}
