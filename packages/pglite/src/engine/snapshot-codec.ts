import type { EngineSnapshot } from './snapshot.js'
import type { TreeEntry } from './pgdata-tree.js'

/**
 * A snapshot as one byte array, for the disk cache: a JSON header, the
 * memory chunks, then every file's bytes. Decoding shares the file's bytes
 * (files are copied on their first write).
 */
const MAGIC = 'PGWSNAP1'
const CHUNK = 65536

interface Header {
  pages: number
  tableLength: number
  cwd: string
  stackPointer: number
  timers: EngineSnapshot['timers']
  streams: EngineSnapshot['streams']
  chunkCount: number
  dirs: { root: string; entries: { path: string; mode: number; mtimeMs: number; size: number }[] }[]
  note?: string
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
      entries: tree.map((e) => ({ path: e.path, mode: e.mode, mtimeMs: e.mtimeMs, size: e.data ? e.data.byteLength : -1 })),
    })),
    ...(snap.note !== undefined ? { note: snap.note } : {}),
  }
  const json = new TextEncoder().encode(JSON.stringify(header))
  const headerEnd = align8(8 + 4 + json.length)
  let total = headerEnd + snap.chunkIndices.byteLength + snap.chunkBytes.byteLength
  for (const { tree } of snap.dirs) for (const e of tree) total += e.data?.byteLength ?? 0
  const out = new Uint8Array(total)
  out.set(new TextEncoder().encode(MAGIC), 0)
  new DataView(out.buffer).setUint32(8, json.length, true)
  out.set(json, 12)
  let at = headerEnd
  out.set(new Uint8Array(snap.chunkIndices.buffer, snap.chunkIndices.byteOffset, snap.chunkIndices.byteLength), at)
  at += snap.chunkIndices.byteLength
  out.set(snap.chunkBytes, at)
  at += snap.chunkBytes.byteLength
  for (const { tree } of snap.dirs) {
    for (const e of tree) {
      if (!e.data) continue
      out.set(e.data, at)
      at += e.data.byteLength
    }
  }
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
    const tree: TreeEntry[] = entries.map(({ path, mode, mtimeMs, size }) => {
      if (size < 0) return { path, mode, mtimeMs }
      const data = bytes.subarray(at, at + size)
      at += size
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
  }
}

function align8(n: number): number {
  return (n + 7) & ~7
}
