import type { EngineSnapshot } from './snapshot.js'
import { SPARSE_CHUNK, writtenChunkStarts, type TreeEntry } from '../files/pgdata-tree.js'

/**
 * A snapshot as one byte array, for the disk cache: a JSON header, the
 * memory chunks, then every file's bytes. Decoding shares the file's bytes
 * (files are copied on their first write). A file with all-zero 64 KiB
 * chunks (the WAL segment: 16 MB holding ~1 MB) keeps only its other chunks
 * and is rebuilt whole once, when decoded: a third less to read and check
 * in every process that starts from the file.
 */
const MAGIC = 'PGWSNAP2'
const CHUNK = 65536

interface Header {
  pages: number
  tableLength: number
  cwd: string
  stackPointer: number
  timers: EngineSnapshot['timers']
  streams: EngineSnapshot['streams']
  chunkCount: number
  dirs: { root: string; entries: EntryHeader[] }[]
  note?: string
  /** A backend with contrib side modules preloaded: what a restore replays (dynamic-links.ts). */
  links?: EngineSnapshot['links']
}

interface EntryHeader {
  path: string
  mode: number
  mtimeMs: number
  /** -1 for a directory. */
  size: number
  /** Set when the file has all-zero chunks: the indices of the chunks stored, in order. */
  kept?: number[]
}

/** Indices of the non-zero chunks of `data`, or undefined when none is zero. */
function keptChunks(data: Uint8Array): number[] | undefined {
  const starts = writtenChunkStarts(data)
  return starts.length === Math.ceil(data.byteLength / SPARSE_CHUNK) ? undefined : starts.map((start) => start / SPARSE_CHUNK)
}

function storedBytes(entry: EntryHeader): number {
  if (entry.size < 0) return 0
  if (!entry.kept) return entry.size
  let bytes = 0
  for (const c of entry.kept) bytes += Math.min(SPARSE_CHUNK, entry.size - c * SPARSE_CHUNK)
  return bytes
}

export function encodeSnapshot(snap: EngineSnapshot): Uint8Array {
  const header: Header = {
    pages: snap.pages,
    tableLength: snap.tableLength,
    cwd: snap.cwd,
    stackPointer: snap.stackPointer,
    timers: snap.timers,
    streams: snap.streams,
    chunkCount: snap.chunkIndices.length,
    dirs: snap.dirs.map(({ root, tree }) => ({
      root,
      entries: tree.map((e): EntryHeader => {
        const head: EntryHeader = { path: e.path, mode: e.mode, mtimeMs: e.mtimeMs, size: e.data ? e.data.byteLength : -1 }
        const kept = e.data ? keptChunks(e.data) : undefined
        return kept ? { ...head, kept } : head
      }),
    })),
    ...(snap.note !== undefined ? { note: snap.note } : {}),
    ...(snap.links ? { links: snap.links } : {}),
  }
  const json = new TextEncoder().encode(JSON.stringify(header))
  const headerEnd = align8(8 + 4 + json.length)
  let total = headerEnd + snap.chunkIndices.byteLength + snap.chunkBytes.byteLength
  for (const { entries } of header.dirs) for (const e of entries) total += storedBytes(e)
  const out = new Uint8Array(total)
  out.set(new TextEncoder().encode(MAGIC), 0)
  new DataView(out.buffer).setUint32(8, json.length, true)
  out.set(json, 12)
  let at = headerEnd
  out.set(new Uint8Array(snap.chunkIndices.buffer, snap.chunkIndices.byteOffset, snap.chunkIndices.byteLength), at)
  at += snap.chunkIndices.byteLength
  out.set(snap.chunkBytes, at)
  at += snap.chunkBytes.byteLength
  snap.dirs.forEach(({ tree }, d) => {
    tree.forEach((e, i) => {
      if (!e.data) return
      const kept = header.dirs[d]!.entries[i]!.kept
      if (!kept) {
        out.set(e.data, at)
        at += e.data.byteLength
        return
      }
      for (const c of kept) {
        const piece = e.data.subarray(c * SPARSE_CHUNK, Math.min((c + 1) * SPARSE_CHUNK, e.data.byteLength))
        out.set(piece, at)
        at += piece.byteLength
      }
    })
  })
  return out
}

/** @throws Error when the bytes are not a snapshot of this format. */
export function decodeSnapshot(bytes: Uint8Array): EngineSnapshot {
  if (bytes.byteLength < 12 || new TextDecoder().decode(bytes.subarray(0, 8)) !== MAGIC) {
    throw new Error('not a pgwasm snapshot')
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const jsonLength = view.getUint32(8, true)
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + jsonLength))) as Header
  let at = align8(12 + jsonLength)
  // Copied: Int32Array needs 4-byte alignment the file buffer may not give.
  const chunkIndices = new Int32Array(bytes.slice(at, at + 4 * header.chunkCount).buffer)
  at += 4 * header.chunkCount
  const chunkBytes = bytes.subarray(at, at + header.chunkCount * CHUNK)
  at += header.chunkCount * CHUNK
  const dirs = header.dirs.map(({ root, entries }) => {
    const tree: TreeEntry[] = entries.map((entry) => {
      const { path, mode, mtimeMs, size, kept } = entry
      if (size < 0) return { path, mode, mtimeMs }
      const stored = storedBytes(entry)
      if (at + stored > bytes.byteLength) throw new Error('snapshot is shorter than its header describes')
      if (!kept) {
        const data = bytes.subarray(at, at + size)
        at += size
        return { path, mode, mtimeMs, data }
      }
      // Zeroed by the allocator: the OS maps the left-out chunks lazily.
      const data = new Uint8Array(size)
      for (const c of kept) {
        if (!Number.isInteger(c) || c < 0 || c * SPARSE_CHUNK >= size) throw new Error(`snapshot file ${path} names chunk ${c}`)
        const length = Math.min(SPARSE_CHUNK, size - c * SPARSE_CHUNK)
        data.set(bytes.subarray(at, at + length), c * SPARSE_CHUNK)
        at += length
      }
      return { path, mode, mtimeMs, data }
    })
    return { root, tree }
  })
  if (at !== bytes.byteLength) throw new Error(`snapshot is ${bytes.byteLength} bytes, its header describes ${at}`)
  return {
    pages: header.pages,
    tableLength: header.tableLength,
    chunkIndices,
    chunkBytes,
    dirs,
    streams: header.streams,
    cwd: header.cwd,
    stackPointer: header.stackPointer,
    timers: header.timers,
    ...(typeof header.note === 'string' ? { note: header.note } : {}),
    ...(header.links ? { links: checkedLinks(header.links) } : {}),
  }
}

/** The links of a decoded header, in the shape a restore relies on. */
function checkedLinks(links: NonNullable<EngineSnapshot['links']>): NonNullable<EngineSnapshot['links']> {
  const int = (n: unknown): boolean => Number.isInteger(n)
  const fine =
    int(links.preparedTable) &&
    (links.preparedBreak === undefined || int(links.preparedBreak)) &&
    Array.isArray(links.opens) &&
    links.opens.every(int) &&
    Array.isArray(links.syms) &&
    links.syms.every((l) => Array.isArray(l) && l.length === 3 && int(l[0]) && typeof l[1] === 'string' && int(l[2]))
  if (!fine) throw new Error('snapshot links are malformed')
  return links
}

function align8(n: number): number {
  return (n + 7) & ~7
}
