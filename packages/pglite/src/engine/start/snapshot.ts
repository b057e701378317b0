import type { FsNode, PostgresModule } from '../emscripten.js'
import type { ModuleControl } from '../backend/module.js'
import { PGDATA } from '../backend/module.js'
import { copiesOnWrite, copyBytes, isZero, materializeTree, nativeZeroCheck, type DataTree, type TreeEntry } from '../files/pgdata-tree.js'
import { replayDynamicLinks, type RecordedLinks } from './dynamic-links.js'

/**
 * Everything a started, idle backend is, so that a blank module can become an
 * independent copy of it without running Postgres' startup.
 * Immutable once taken; one snapshot serves any number of restores.
 */
export interface EngineSnapshot {
  readonly pages: number
  readonly tableLength: number
  /** Indices of the 64 KiB chunks that are not all zero, and their bytes back to back. */
  readonly chunkIndices: Int32Array
  readonly chunkBytes: Uint8Array
  readonly dirs: readonly { readonly root: string; readonly tree: DataTree }[]
  readonly streams: readonly StreamRecord[]
  readonly cwd: string
  readonly stackPointer: number
  readonly timers: readonly { readonly which: number; readonly remainingMs: number }[]
  /** What its taker keeps with a saved state (JSON text); the engine does not read it. */
  readonly note?: string
  /**
   * A backend with preloaded side modules (contrib): the table's length
   * after the preload and what Postgres linked since, replayed on restore
   * into a module preloaded the same way (dynamic-links.ts).
   */
  readonly links?: RecordedLinks & { readonly preparedTable: number; readonly preparedBreak?: number }
}

export interface StreamRecord {
  readonly fd: number
  readonly path: string
  readonly flags: number
  readonly position: number
  readonly pipe: 'read' | 'write' | null
}

const CHUNK = 65536
const O_CREAT = 64
const O_EXCL = 128
const O_TRUNC = 512
/** The directories Postgres writes to: the cluster and its POSIX shared memory. */
const SNAPSHOT_DIRS = [PGDATA, '/dev/shm']

interface FsInternals {
  streams: (FsStreamLike | null | undefined)[]
  currentPath: string
  open(path: string, flags: number): FsStreamLike
}

interface FsStreamLike {
  fd: number
  path: string
  flags: number
  position: number
  node: FsNode & { pipe?: { readNode: FsNode } }
}

function fsInternals(mod: PostgresModule): FsInternals {
  return mod.FS as unknown as FsInternals
}

function tableOf(control: ModuleControl): WebAssembly.Table {
  return control.instance!.exports.__indirect_function_table as WebAssembly.Table
}

/** Function-table entries in use: grows when a side module (`.so`) is loaded. */
export function tableLength(control: ModuleControl): number {
  return tableOf(control).length
}

/** Captures an idle backend. Call between requests only. */
export function takeSnapshot(mod: PostgresModule, control: ModuleControl): EngineSnapshot {
  const heap = mod.HEAPU8
  // What a module needs to take this snapshot: nothing lives above the
  // break, so a module of any size from there up will do (see restore).
  const pages = chunksBelowBreak(heap, control)
  const indices = nonZeroChunks(heap, pages, memoryOf(control))
  const chunkBytes = new Uint8Array(indices.length * CHUNK)
  indices.forEach((c, i) => chunkBytes.set(heap.subarray(c * CHUNK, (c + 1) * CHUNK), i * CHUNK))

  const fs = fsInternals(mod)
  const streams: StreamRecord[] = []
  for (let fd = 3; fd < fs.streams.length; fd++) {
    const s = fs.streams[fd]
    if (!s) continue
    const pipe = s.node.pipe ? (s.node.pipe.readNode === s.node ? 'read' : 'write') : null
    streams.push({ fd, path: s.path, flags: s.flags, position: pipe ? 0 : s.position, pipe })
  }
  const now = performance.now()
  return {
    pages,
    tableLength: tableLength(control),
    chunkIndices: Int32Array.from(indices),
    chunkBytes,
    dirs: SNAPSHOT_DIRS.filter((root) => mod.FS.analyzePath(root).exists).map((root) => ({
      root,
      tree: captureTree(mod, root),
    })),
    streams,
    cwd: fs.currentPath,
    stackPointer: mod.stackSave(),
    timers: [...control.armed].map(([which, due]) => ({ which, remainingMs: Math.max(1, due - now) })),
    ...(control.links.preparedTable !== undefined ? { links: linksOf(control) } : {}),
  }
}

function linksOf(control: ModuleControl): NonNullable<EngineSnapshot['links']> {
  const { preparedTable, preparedBreak, opens, syms } = control.links
  return {
    preparedTable: preparedTable!,
    ...(preparedBreak !== undefined ? { preparedBreak } : {}),
    opens: [...opens],
    syms: syms.map((l) => [...l] as const),
  }
}

/**
 * How many leading chunks can hold non-zero bytes: nothing writes above the
 * program break (Emscripten's mmap allocates in the heap, the stack lies
 * below it).
 */
function chunksBelowBreak(heap: Uint8Array, control: ModuleControl): number {
  const brkPtr = (control.instance!.exports.emscripten_get_sbrk_ptr as () => number)()
  const brk = new DataView(heap.buffer).getUint32(brkPtr, true)
  return Math.min(heap.byteLength / CHUNK, Math.ceil(brk / CHUNK) + 1)
}


/**
 * `next(from, to)`: the first 64 KiB chunk in [from, to) of the imported
 * memory that is not all zero, else `to`. 16-byte SIMD loads, four per step:
 * a browser has no native memcmp, and a JS word loop over a started
 * backend's ~200 MB took ~50 ms of a first create. Hand-assembled (below);
 * `undefined` where SIMD is missing, and the JS loop is used.
 */
type ChunkScanner = (from: number, to: number) => number

// prettier-ignore
const SCANNER_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  // type: (i32, i32) -> i32
  0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f,
  // import "e" "m": memory, min 1 page
  0x02, 0x08, 0x01, 0x01, 0x65, 0x01, 0x6d, 0x02, 0x00, 0x01,
  // one function of type 0, exported as "n"
  0x03, 0x02, 0x01, 0x00,
  0x07, 0x05, 0x01, 0x01, 0x6e, 0x00, 0x00,
  // code: section size, one body, body size (LEB128)
  0x0a, 0x85, 0x01, 0x01, 0x82, 0x01,
  // locals: p, end (i32); acc (v128)
  0x02, 0x02, 0x7f, 0x01, 0x7b,
  // if (from >= to) return to
  0x20, 0x00, 0x20, 0x01, 0x4f, 0x04, 0x40, 0x20, 0x01, 0x0f, 0x0b,
  0x03, 0x40, // loop chunks
  // p = from << 16; end = p + 65536; acc = 0
  0x20, 0x00, 0x41, 0x10, 0x74, 0x22, 0x02, 0x41, 0x80, 0x80, 0x04, 0x6a, 0x21, 0x03,
  0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x21, 0x04,
  0x03, 0x40, // loop words
  // acc |= load(p) | load(p+16) | load(p+32) | load(p+48)
  0x20, 0x04,
  0x20, 0x02, 0xfd, 0x00, 0x00, 0x00, 0xfd, 0x50,
  0x20, 0x02, 0xfd, 0x00, 0x00, 0x10, 0xfd, 0x50,
  0x20, 0x02, 0xfd, 0x00, 0x00, 0x20, 0xfd, 0x50,
  0x20, 0x02, 0xfd, 0x00, 0x00, 0x30, 0xfd, 0x50,
  0x21, 0x04,
  // p += 64; while (p < end)
  0x20, 0x02, 0x41, 0xc0, 0x00, 0x6a, 0x22, 0x02, 0x20, 0x03, 0x49, 0x0d, 0x00,
  0x0b,
  // if (any_true(acc)) return from
  0x20, 0x04, 0xfd, 0x53, 0x04, 0x40, 0x20, 0x00, 0x0f, 0x0b,
  // while (++from < to)
  0x20, 0x00, 0x41, 0x01, 0x6a, 0x22, 0x00, 0x20, 0x01, 0x49, 0x0d, 0x00,
  0x0b,
  0x20, 0x01,
  0x0b,
])

function memoryOf(control: ModuleControl): WebAssembly.Memory | undefined {
  const memory = control.imports?.env?.memory
  return memory instanceof WebAssembly.Memory ? memory : undefined
}

const SCAN_STEP = 16
let scannerModule: WebAssembly.Module | null | undefined
const scanners = new WeakMap<WebAssembly.Memory, ChunkScanner>()

function scannerFor(heap: Uint8Array, memory: WebAssembly.Memory | undefined): ChunkScanner | undefined {
  if (!memory || memory.buffer !== heap.buffer) return undefined
  let scan = scanners.get(memory)
  if (scan) return scan
  try {
    scannerModule ??= new WebAssembly.Module(SCANNER_WASM)
    const instance = new WebAssembly.Instance(scannerModule, { e: { m: memory } })
    scan = instance.exports.n as ChunkScanner
  } catch {
    scannerModule = null
    return undefined
  }
  scanners.set(memory, scan)
  return scan
}

/** Most of a started backend's ~200 MB is zero; only ~13 MB needs copying. Scans the first `pages` chunks. */
function nonZeroChunks(heap: Uint8Array, pages: number, memory?: WebAssembly.Memory, skip?: Uint8Array): number[] {
  const indices: number[] = []
  if (nativeZeroCheck) {
    for (let c = 0; c < pages; c++) if (!skip?.[c] && !isZero(heap, c * CHUNK, (c + 1) * CHUNK)) indices.push(c)
    return indices
  }
  const scan = scannerModule === null ? undefined : scannerFor(heap, memory)
  if (scan) {
    // Short calls: V8 runs a new function as baseline code and swaps in the
    // optimized one (~4x faster here) only between calls.
    for (let c = 0; c < pages; ) {
      if (skip?.[c]) {
        c++
        continue
      }
      let to = Math.min(c + SCAN_STEP, pages)
      for (let k = c + 1; k < to; k++) if (skip?.[k]) to = k
      const found = scan(c, to)
      if (found < to) {
        indices.push(found)
        c = found + 1
      } else c = to
    }
    return indices
  }
  const words = new Uint32Array(heap.buffer, 0, heap.byteLength >>> 2)
  const chunkWords = CHUNK >>> 2
  for (let c = 0; c < pages; c++) {
    if (skip?.[c]) continue
    const end = (c + 1) * chunkWords
    for (let w = c * chunkWords; w < end; w++) {
      if (words[w] !== 0) {
        indices.push(c)
        break
      }
    }
  }
  return indices
}

/**
 * Reads a MEMFS directory as a tree without copying files: where the module
 * copies on write, a file the backend wrote is flagged shared, so the
 * backend copies it before its next write (most never are: the snapshot of
 * a first create used to copy the 16 MB WAL segment and more, ~20 ms).
 * Elsewhere files not already shared are copied.
 */
function captureTree(mod: PostgresModule, root: string): DataTree {
  const cow = copiesOnWrite(mod)
  const out: TreeEntry[] = []
  const walk = (node: FsNode, rel: string): void => {
    const children = node.contents as Record<string, FsNode>
    for (const name of Object.keys(children).sort()) {
      const child = children[name]!
      const path = rel ? `${rel}/${name}` : name
      if (mod.FS.isDir(child.mode)) {
        out.push({ path, mode: child.mode, mtimeMs: child.mtime })
        walk(child, path)
      } else if (mod.FS.isFile(child.mode)) {
        const contents = (child.contents as Uint8Array | null) ?? new Uint8Array(0)
        let data: Uint8Array
        if (child.pgwasmShared || cow) {
          data = contents.subarray(0, child.usedBytes)
          child.pgwasmShared = true
        } else {
          data = copyBytes(contents, child.usedBytes)
        }
        out.push({ path, mode: child.mode, mtimeMs: child.mtime, data })
      }
    }
  }
  walk(mod.FS.lookupPath(root).node, '')
  return out
}

/**
 * Makes a module whose backend is done with (an in-memory database being
 * closed) fit for `restoreSnapshot` again: every descriptor Postgres opened
 * closed, the directories a snapshot carries removed, timers cleared.
 * Memory needs nothing here: a restore zeroes every non-zero chunk below
 * the break that the snapshot does not overwrite.
 */
export function resetForRestore(mod: PostgresModule, control: ModuleControl): void {
  control.disarmAll()
  const fs = fsInternals(mod)
  for (let fd = 3; fd < fs.streams.length; fd++) {
    const stream = fs.streams[fd]
    if (stream) (mod.FS as unknown as { close(s: FsStreamLike): void }).close(stream)
  }
  mod.FS.chdir('/')
  for (const root of SNAPSHOT_DIRS) removeTree(mod, root)
  // Whatever SQL wrote there (lo_export, COPY TO) goes with the database.
  removeTree(mod, '/tmp')
  mod.FS.mkdir('/tmp', 0o777)
}

/**
 * Unlinks a directory tree from MEMFS in one pass over its nodes (the FS
 * API would resolve a path per file, most of a close's time).
 */
function removeTree(mod: PostgresModule, path: string): void {
  const fs = mod.FS as unknown as FsInternals & { hashRemoveNode(node: FsNode): void; isDir(mode: number): boolean }
  const found = mod.FS.analyzePath(path)
  if (!found.exists || !found.object) return
  const root = found.object
  const forget = (node: FsNode): void => {
    if (fs.isDir(node.mode)) for (const child of Object.values(node.contents as Record<string, FsNode>)) forget(child)
    fs.hashRemoveNode(node)
  }
  forget(root)
  delete (root.parent.contents as Record<string, FsNode>)[root.name]
}

/**
 * Turns a blank or reset module into a copy of the snapshot's backend. Only
 * memory below the module's program break can be non-zero beforehand.
 */
export function restoreSnapshot(mod: PostgresModule, control: ModuleControl, snap: EngineSnapshot): void {
  const heap = mod.HEAPU8
  // A larger module is fine: Postgres' allocator only knows the break it
  // gets back from the snapshot, and memory above it stays zero.
  if (heap.byteLength < snap.pages * CHUNK) {
    throw new Error(`snapshot needs ${snap.pages} memory pages, the module has ${heap.byteLength / CHUNK}`)
  }
  // With side modules: the module must have them preloaded as the snapshot's had (the same table), and gets their links after the memory.
  // A module that served one before (recycled) may have more: the replay checks each slot it relies on.
  const tableBefore = tableLength(control)
  const fits = snap.links ? tableBefore === snap.links.preparedTable || tableBefore >= snap.tableLength : tableBefore === snap.tableLength
  if (!fits) throw new Error(`snapshot table has ${snap.tableLength} entries, the module ${tableBefore}`)
  const preparedBreak = snap.links?.preparedBreak
  if (preparedBreak !== undefined && control.links.preparedBreak !== undefined && preparedBreak !== control.links.preparedBreak) {
    throw new Error(`the snapshot's side modules end at ${preparedBreak}, the module's at ${control.links.preparedBreak}`)
  }
  const fs = fsInternals(mod)
  for (const { root, tree } of snap.dirs) materializeTree(mod, root, tree)
  mod.FS.chdir(snap.cwd)

  // Streams at their recorded descriptors: Postgres' file-descriptor cache
  // refers to them by number.
  const pipe2 = control.imports!.env!.__syscall_pipe2 as (fdPtr: number, flags: number) => number
  const placed: [FsStreamLike, StreamRecord][] = []
  for (const rec of snap.streams) {
    if (rec.pipe === 'write') continue
    if (rec.pipe === 'read') {
      const scratch = (mod.stackSave() - 64) & ~7
      if (pipe2(scratch, 0) !== 0) throw new Error('pipe2 failed while restoring a snapshot')
      const view = new DataView(heap.buffer)
      placed.push([fs.streams[view.getInt32(scratch, true)]!, rec])
      const writeRec = snap.streams.find((s) => s.pipe === 'write')
      if (writeRec) placed.push([fs.streams[view.getInt32(scratch + 4, true)]!, writeRec])
      continue
    }
    const stream = fs.open(rec.path, rec.flags & ~(O_CREAT | O_EXCL | O_TRUNC))
    stream.position = rec.position
    placed.push([stream, rec])
  }
  // Vacate every temporary descriptor first, so no placement lands on a
  // stream that has not moved yet.
  for (const [stream] of placed) fs.streams[stream.fd] = null
  for (const [stream, rec] of placed) {
    if (fs.streams[rec.fd]) throw new Error(`descriptor ${rec.fd} is taken while restoring a snapshot`)
    stream.fd = rec.fd
    stream.flags = rec.flags
    fs.streams[rec.fd] = stream
  }

  const indices = snap.chunkIndices
  // Chunks the snapshot does not overwrite must end up zero. Below the break
  // of a reused module most already are (its shared buffers were mostly
  // never touched): zero those found dirty rather than the whole range.
  // The ones it overwrites are not looked at (a third of them with extensions).
  const covered = new Uint8Array(Math.ceil(heap.byteLength / CHUNK))
  for (let i = 0; i < indices.length; i++) covered[indices[i]!] = 1
  for (const c of nonZeroChunks(heap, chunksBelowBreak(heap, control), memoryOf(control), covered)) heap.fill(0, c * CHUNK, (c + 1) * CHUNK)
  for (let i = 0; i < indices.length; i++) {
    heap.set(snap.chunkBytes.subarray(i * CHUNK, (i + 1) * CHUNK), indices[i]! * CHUNK)
  }
  mod.stackRestore(snap.stackPointer)
  for (const { which, remainingMs } of snap.timers) control.arm(which, remainingMs)
  if (snap.links) {
    // What this module linked before belongs to memory that is gone: the snapshot's links replace it.
    control.links.preparedTable = snap.links.preparedTable
    replayDynamicLinks(mod, control.imports!.env as Record<string, unknown>, snap.links, control.links, tableOf(control))
    const expected = Math.max(tableBefore, snap.tableLength)
    if (tableLength(control) !== expected) throw new Error(`restored links left ${tableLength(control)} table entries, expected ${expected}`)
  }
}
