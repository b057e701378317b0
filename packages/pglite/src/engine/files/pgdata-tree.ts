import type { EmscriptenFs, FsNode, FsStream, MemFs, PostgresModule, StreamWrite } from '../emscripten.js'
import { budgetOf, ownBytes } from '../backend/memory-budget.js'
import { inNode } from '../node-builtin.js'

/** One file or directory of a data directory, path relative to its root. */
export interface TreeEntry {
  readonly path: string
  readonly mode: number
  readonly mtimeMs: number
  /** File contents; absent for directories. Never written to once in a tree. */
  readonly data?: Uint8Array
}

/** A data directory as a list; every directory comes before its contents. */
export type DataTree = readonly TreeEntry[]

const S_IFDIR = 0o040000

export function isDirEntry(entry: TreeEntry): boolean {
  return (entry.mode & 0o170000) === S_IFDIR
}

/** The bytes of a tree's relation files (under `global/` and `base/`). */
export function treeRelationBytes(tree: DataTree): number {
  let bytes = 0
  for (const entry of tree) if (entry.data && (entry.path.startsWith('global/') || entry.path.startsWith('base/'))) bytes += entry.data.byteLength
  return bytes
}

/** Reads a directory of an Emscripten FS into a tree (contents copied). */
export function readTree(fs: EmscriptenFs, root: string): DataTree {
  const out: TreeEntry[] = []
  const walk = (rel: string): void => {
    const dir = rel ? `${root}/${rel}` : root
    for (const name of fs.readdir(dir).sort()) {
      if (name === '.' || name === '..') continue
      const path = rel ? `${rel}/${name}` : name
      const stat = fs.stat(`${root}/${path}`)
      if (fs.isDir(stat.mode)) {
        out.push({ path, mode: stat.mode, mtimeMs: stat.mtime.getTime() })
        walk(path)
      } else if (fs.isFile(stat.mode)) {
        out.push({ path, mode: stat.mode, mtimeMs: stat.mtime.getTime(), data: fs.readFile(`${root}/${path}`) })
      }
    }
  }
  walk('')
  return out
}

const cowInstalled = new WeakSet<MemFs>()

/**
 * A private copy of the first `length` bytes. Not `.slice()`: on a Node
 * Buffer (templates read from disk are Buffer views) slice is a view, and a
 * write through it would change the template of every database.
 */
export function copyBytes(bytes: Uint8Array, length = bytes.byteLength): Uint8Array {
  const out = new Uint8Array(length)
  out.set(bytes.subarray(0, length))
  return out
}

/** The unit in which files are copied and stored sparsely: all-zero chunks of it are left out. */
export const SPARSE_CHUNK = 65536
/** Non-zero chunks of shared contents, per array and length: found once, used by every database that writes the file. */
const writtenChunks = new WeakMap<Uint8Array, { length: number; chunks: number[] }>()

const ZEROS = new Uint8Array(SPARSE_CHUNK)
type BufferLike = { from(buf: ArrayBufferLike, offset: number, length: number): { equals(other: Uint8Array): boolean } }
const NodeBuffer = (globalThis as { Buffer?: BufferLike }).Buffer

/** Whether {@link isZero} compares in native code (Node); elsewhere it is a JS byte loop. */
export const nativeZeroCheck = NodeBuffer !== undefined

/** Whether `bytes[start, end)` (at most 64 KiB) is all zero. */
export function isZero(bytes: Uint8Array, start: number, end: number): boolean {
  // memcmp in native code where there is one: ~10x faster than a JS loop.
  const length = end - start
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset + start, length).equals(length === SPARSE_CHUNK ? ZEROS : ZEROS.subarray(0, length))
  for (let i = start; i < end; i++) if (bytes[i] !== 0) return false
  return true
}

/**
 * A private copy of the first `length` bytes that copies only the non-zero
 * 64 KiB chunks into a zeroed array: the OS maps the rest lazily, so a
 * database that appends to a mostly empty file (the 16 MB WAL segment of a
 * template holds ~7 MB) does not pay memory for the empty part.
 */
export function copyWritten(bytes: Uint8Array, length: number): Uint8Array {
  if (length < 4 * SPARSE_CHUNK) return copyBytes(bytes, length)
  const out = zeroedArray(length)
  for (const start of writtenChunkStarts(bytes, length)) out.set(bytes.subarray(start, Math.min(start + SPARSE_CHUNK, length)), start)
  return out
}

/**
 * Where the 64 KiB chunks of `bytes[0, length)` that are not all zero
 * start; found once per array and length (the copy on first write and the
 * snapshot codec both ask).
 */
export function writtenChunkStarts(bytes: Uint8Array, length = bytes.byteLength): readonly number[] {
  let known = writtenChunks.get(bytes)
  if (known?.length !== length) {
    const chunks: number[] = []
    for (let start = 0; start < length; start += SPARSE_CHUNK) {
      if (!isZero(bytes, start, Math.min(start + SPARSE_CHUNK, length))) chunks.push(start)
    }
    writtenChunks.set(bytes, (known = { length, chunks }))
  }
  return known.chunks
}

/** From this length {@link zeroedArray} reserves rather than allocates. */
const RESERVED_ZEROS_FROM = 1024 * 1024

/**
 * A zeroed array for a copy that fills only part of it. Past a megabyte, in
 * Node, it sits on a resizable ArrayBuffer of that size: its pages come from
 * reserved address space and stay unmapped until written, where a plain
 * array's memory comes from the allocator, which clears it again when it
 * reuses freed memory. A database's first write to the template's 16 MB WAL
 * segment (~1 MB of it written), once per test reset: ~1.2 -> ~0.75 ms.
 * Node only ({@link resizableFiles}).
 */
function zeroedArray(length: number): Uint8Array {
  if (resizableFiles && length >= RESERVED_ZEROS_FROM) {
    try {
      return new Uint8Array(new (ArrayBuffer as unknown as ResizableBufferConstructor)(length, { maxByteLength: length }), 0, length)
    } catch {
      // Out of address space to reserve: an allocated array does the same.
    }
  }
  return new Uint8Array(length)
}

/** Whether the module's MEMFS copies a node flagged `pgwasmShared` before writing it. */
export function copiesOnWrite(mod: PostgresModule): boolean {
  return cowInstalled.has(mod.MEMFS)
}

/**
 * Counts and bounds the module's in-memory files against its memory budget
 * from now on, and makes MEMFS copy a shared file's contents before its
 * first write. Every engine gets it, whatever holds its data directory: a
 * directory database's data is on disk, but its `/tmp` is in memory, and a
 * superuser's `COPY ... TO '/tmp/...'` wrote 5 GB there past a ceiling that
 * never saw it. Both entry points are wrapped: file streams use
 * `ops_table.file.stream.write` (built at the first node creation), msync
 * of shared mmaps calls `stream_ops.write` directly.
 */
export function watchMemoryFiles(mod: PostgresModule): void {
  const memfs = mod.MEMFS
  if (cowInstalled.has(memfs)) return
  cowInstalled.add(memfs)
  const noSpace = (err: unknown): unknown => (isOutOfMemory(err) ? new mod.FS.ErrnoError(ENOSPC) : err)
  const refuse = (): Error => new mod.FS.ErrnoError(ENOSPC)
  const wrap = (write: StreamWrite): StreamWrite =>
    function (stream, buffer, offset, length, position, canOwn) {
      try {
        const node = stream.node
        const budget = budgetOf(memfs)
        // Unlimited (the default): no closure on every file write.
        if (!budget?.limited) return copyAndWrite(write, stream, buffer, offset, length, position, canOwn)
        return budget.fileChange(node, position + length - ownBytes(node), () => copyAndWrite(write, stream, buffer, offset, length, position, canOwn), refuse)
      } catch (err) {
        throw noSpace(err)
      }
    }
  memfs.stream_ops.write = wrap(memfs.stream_ops.write)
  if (memfs.ops_table) {
    memfs.ops_table.file.stream.write = wrap(memfs.ops_table.file.stream.write)
    // A file that leaves the tree no longer counts against the memory budget.
    const dirOps = memfs.ops_table.dir.node
    const { unlink, rename } = dirOps
    dirOps.unlink = (parent, name) => {
      const node = (parent.contents as Record<string, FsNode>)[name]
      unlink(parent, name)
      budgetOf(memfs)?.fileGone(node)
    }
    dirOps.rename = (node, dir, name) => {
      const replaced = (dir.contents as Record<string, FsNode> | null)?.[name]
      rename(node, dir, name)
      if (replaced !== node) budgetOf(memfs)?.fileGone(replaced)
    }
  }
  memfs.expandFileStorage = (node, capacity) => {
    try {
      const budget = budgetOf(memfs)
      if (!budget?.limited) expandFileStorage(node, capacity)
      else budget.fileChange(node, capacity - ownBytes(node), () => expandFileStorage(node, capacity), refuse)
    } catch (err) {
      throw noSpace(err)
    }
  }
  memfs.resizeFileStorage = (node, size) => {
    try {
      const budget = budgetOf(memfs)
      if (!budget?.limited) resizeFileStorage(node, size)
      else budget.fileChange(node, size - ownBytes(node), () => resizeFileStorage(node, size), refuse)
    } catch (err) {
      throw noSpace(err)
    }
  }
}

/** A stream write, after copying a shared file's contents (its first write). */
function copyAndWrite(write: StreamWrite, stream: FsStream, buffer: Uint8Array, offset: number, length: number, position: number, canOwn?: boolean): number {
  const node = stream.node
  if (node.pgwasmShared) {
    node.contents = copyWritten(node.contents as Uint8Array, node.usedBytes)
    node.pgwasmShared = false
  }
  return write(stream, buffer, offset, length, position, canOwn)
}

/** Emscripten's errno for "No space left on device". */
const ENOSPC = 51

/**
 * V8's and SpiderMonkey's ways of refusing an allocation. A file of an
 * in-memory file system grows into new JS memory, and the runtime may refuse
 * it (`RangeError: Array buffer allocation failed`: a browser tab's limit,
 * an address-space limit). Thrown through the engine, that error aborted it
 * and closed the instance, every table lost, for one statement that loaded
 * too much. As ENOSPC, Postgres fails that statement (53100, "could not
 * extend file ...: No space left on device") and goes on, as it does on a
 * full disk. WAL that cannot grow still stops the engine, as a full WAL disk
 * stops Postgres.
 */
function isOutOfMemory(err: unknown): boolean {
  if (err instanceof RangeError) return /allocation failed|array buffer length|array length|out of memory/i.test(err.message)
  return err instanceof Error && err.name === 'InternalError' && /memory|allocation/i.test(err.message)
}

/** Files double up to this size, then grow by half. */
const DOUBLING_LIMIT = 64 * 1024 * 1024

/**
 * MEMFS' own growth adds only 1/8 past 1 MB, so a file written 8 kB at a
 * time (a WAL segment being zeroed, a table being extended) was copied into
 * a new array ~25 times on its way to 16 MB: about 5% of the speedtest's
 * time went to those copies and to collecting the arrays they left behind.
 */
function expandFileStorage(node: FsNode, capacity: number): void {
  const old = node.contents as Uint8Array | null
  const current = old?.length ?? 0
  if (current >= capacity) return
  if (capacity >= IN_PLACE_FROM && growInPlace(node, old, capacity)) return
  const grown = Math.max(capacity, current < DOUBLING_LIMIT ? current * 2 : current + (current >>> 1), 256, walSegmentBytes(node))
  const next = new Uint8Array(grown)
  if (old && node.usedBytes > 0) next.set(old.subarray(0, node.usedBytes))
  node.contents = next
}

/**
 * A new WAL segment is written zeros first, 8 kB at a time, to its full
 * size: doubling its way there made ~17 arrays per segment, copied 16 MB
 * and faulted in 32 MB for every 16 MB of WAL (a 1 GB COPY writes 61
 * segments in one request). It grows at once to the size of the largest
 * segment beside it; the first one still doubles, as the segment size is
 * whatever initdb chose.
 */
function walSegmentBytes(node: FsNode): number {
  const dir = node.parent
  if (dir?.name !== 'pg_wal' || !dir.contents || dir.contents instanceof Uint8Array) return 0
  let largest = 0
  for (const name in dir.contents) {
    const sibling = dir.contents[name]!
    if (sibling !== node && sibling.contents instanceof Uint8Array && sibling.usedBytes > largest) largest = sibling.usedBytes
  }
  return largest
}

/** Past this size a file grows in place (WAL segments, 16 MB, stay below). */
const IN_PLACE_FROM = 32 * 1024 * 1024
/** The largest in-place file: a relation segment (RELSEG_SIZE blocks of 8 kB) never grows past 1 GiB. */
const IN_PLACE_MAX = 1024 * 1024 * 1024
const IN_PLACE_STEP = 8 * 1024 * 1024

type ResizableBuffer = ArrayBuffer & { resize(length: number): void; readonly maxByteLength: number }
type ResizableBufferConstructor = new (length: number, options: { maxByteLength: number }) => ResizableBuffer
/**
 * Whether file contents may sit on resizable ArrayBuffers: in Node only, as
 * browsers' storage APIs refuse views of them (an OPFS
 * `FileSystemSyncAccessHandle.write` threw, and an opfs-ahp:// database with
 * a table past 32 MB could not be written).
 */
const resizableFiles = inNode && typeof (ArrayBuffer.prototype as Partial<ResizableBuffer>).resize === 'function'

/** Arrays made by {@link growInPlace}: views that track their buffer's length, seen by nobody else. */
const inPlace = new WeakSet<Uint8Array>()

/**
 * Even doubling copies a large file on each growth: a bulk load of 1M rows
 * of 1 kB copied ~2 GB per 1 GB table and spent about a fifth of its time
 * there. A file past {@link IN_PLACE_FROM} moves once into a resizable
 * ArrayBuffer that reserves {@link IN_PLACE_MAX} of address space and
 * commits memory as it grows, so later growth copies nothing and the file
 * holds no more than 8 MB it does not use. Never shrunk in place: views of
 * a snapshot's tree may point into it (the node is then flagged shared and
 * copied before its next write or resize). Node only
 * ({@link resizableFiles}): in browsers files grow by copying.
 */
function growInPlace(node: FsNode, old: Uint8Array | null, capacity: number): boolean {
  if (!resizableFiles || capacity > IN_PLACE_MAX) return false
  const size = Math.min(IN_PLACE_MAX, Math.ceil(capacity / IN_PLACE_STEP) * IN_PLACE_STEP)
  if (old && inPlace.has(old)) {
    ;(old.buffer as ResizableBuffer).resize(size)
    return true
  }
  let buffer: ResizableBuffer
  try {
    buffer = new (ArrayBuffer as unknown as ResizableBufferConstructor)(size, { maxByteLength: IN_PLACE_MAX })
  } catch {
    // Out of address space to reserve (V8 caps it per process): copy as before.
    return false
  }
  const next = new Uint8Array(buffer)
  if (old && node.usedBytes > 0) next.set(old.subarray(0, node.usedBytes))
  inPlace.add(next)
  node.contents = next
  return true
}

/**
 * MEMFS' own resize (ftruncate, and fallocate, which Postgres uses to
 * extend a relation by many blocks at once during bulk loads) makes an
 * array of exactly the new size and copies the whole file into it, every
 * time: loading a table with COPY or CREATE TABLE AS was quadratic in its
 * size. Growth now reuses the array's spare room or doubles it; a shrink
 * keeps the array unless most of it would sit unused.
 */
function resizeFileStorage(node: FsNode, size: number): void {
  const used = node.usedBytes
  if (used === size) return
  let contents = node.contents as Uint8Array | null
  if (size === 0) {
    node.contents = null
  } else if (size > used) {
    // Bytes past the old end may hold what a shrink left: the file reads zeros there.
    let dirtyEnd = Math.min(size, contents?.length ?? 0)
    if (!contents || contents.length < size || node.pgwasmShared) {
      if (node.pgwasmShared) {
        node.contents = contents = contents ? copyWritten(contents, used) : null
        node.pgwasmShared = false
      }
      const before = contents
      expandFileStorage(node, size)
      contents = node.contents as Uint8Array
      // A new array holds zeros past the bytes copied into it; an array grown
      // in place, past its old length. Zeroing fresh pages only faults them in.
      if (contents !== before) dirtyEnd = used
    }
    if (dirtyEnd > used) contents.fill(0, used, dirtyEnd)
  } else if (contents && contents.length > 4 * size && contents.length > 1024 * 1024) {
    node.contents = contents.slice(0, size)
    node.pgwasmShared = false
  } else if (node.pgwasmShared && contents) {
    // Not written to: a copy of what stays, so nothing of the shared bytes lies past the end.
    node.contents = copyWritten(contents, size)
    node.pgwasmShared = false
  } else if (contents) {
    // MEMFS' allocate (fallocate) grows usedBytes over whatever lies past the end.
    contents.fill(0, size, used)
  }
  node.usedBytes = size
}

/**
 * Creates `tree` under `root` in the module's MEMFS. File contents are shared
 * with the tree (no copy) and copied on the first write, so a new database
 * costs a few ms whatever the template's size.
 */
export function materializeTree(mod: PostgresModule, root: string, tree: DataTree): void {
  const fs = mod.FS
  fs.mkdirTree(root)
  // Node creation below builds MEMFS.ops_table if it is not yet; wrap after.
  const rootNode = fs.lookupPath(root).node
  const dirs = new Map<string, FsNode>([['', rootNode]])
  for (const entry of tree) {
    const slash = entry.path.lastIndexOf('/')
    const parent = dirs.get(slash < 0 ? '' : entry.path.slice(0, slash))
    if (!parent) throw new Error(`data tree lists ${entry.path} before its directory`)
    const name = slash < 0 ? entry.path : entry.path.slice(slash + 1)
    const node = parent.node_ops.mknod(parent, name, entry.mode, 0)
    node.atime = node.mtime = node.ctime = entry.mtimeMs
    if (isDirEntry(entry)) {
      dirs.set(entry.path, node)
    } else if (entry.data && entry.data.byteLength > 0) {
      node.contents = entry.data
      node.usedBytes = entry.data.byteLength
      node.pgwasmShared = true
    }
  }
  watchMemoryFiles(mod)
}
