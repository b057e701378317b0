import { gunzip } from './gzip.js'
import { isDirEntry, type DataTree, type TreeEntry } from './pgdata-tree.js'
import { inNode } from '../node-builtin.js'

/**
 * A data tree as one byte array that is cheap to unpack: every file cut in
 * 8 kB blocks, all-zero blocks left out and identical blocks stored once.
 * An initdb'ed cluster is 40 MB as a tar, but only 15 MB of distinct
 * non-zero blocks (its three databases are near copies, its WAL segment
 * half zeros), 8 MB once the build zeroes the WAL before initdb's last
 * checkpoint (scripts/make-template.ts). The browser build ships its
 * template as this, gzipped (1 MB), and an `idb://` store keeps it as its
 * base image (idb-store.ts).
 *
 * Layout: MAGIC, u32 header length (LE), JSON header, unique blocks back to
 * back. Block refs: 0 = zeros, k = the k-th unique block.
 */
const MAGIC = 'PGWTREE1'
const BLOCK = 8192

interface Header {
  /** Per entry: path, mode, mtime, size (-1: directory), block refs. */
  entries: [string, number, number, number, number[]][]
  /** Byte length of each unique block (all BLOCK but a file's short tail). */
  lengths: number[]
}

export function encodeTreeImage(tree: DataTree): Uint8Array {
  const parts = treeImageParts(tree)
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.byteLength
  }
  return out
}

/**
 * The image of {@link encodeTreeImage} as the parts it is the concatenation
 * of: a head, then each unique block as a view into `tree`'s bytes. A store
 * writes them one after another without holding a copy of the database.
 */
export function treeImageParts(tree: DataTree): Uint8Array[] {
  const ids = new Map<string, number>()
  const blocks: Uint8Array[] = []
  const entries: Header['entries'] = []
  for (const e of tree) {
    if (isDirEntry(e) || !e.data) {
      entries.push([e.path, e.mode, e.mtimeMs, isDirEntry(e) ? -1 : 0, []])
      continue
    }
    const refs: number[] = []
    for (let at = 0; at < e.data.byteLength; at += BLOCK) {
      const block = e.data.subarray(at, Math.min(at + BLOCK, e.data.byteLength))
      if (block.every((b) => b === 0)) {
        refs.push(0)
        continue
      }
      const key = `${block.byteLength}:${hashOf(block)}`
      let id = ids.get(key)
      if (id === undefined || !sameBytes(blocks[id - 1]!, block)) {
        blocks.push(block)
        id = blocks.length
        ids.set(key, id)
      }
      refs.push(id)
    }
    entries.push([e.path, e.mode, e.mtimeMs, e.data.byteLength, refs])
  }
  const header: Header = { entries, lengths: blocks.map((b) => b.byteLength) }
  const json = new TextEncoder().encode(JSON.stringify(header))
  const head = new Uint8Array(12 + json.byteLength)
  head.set(new TextEncoder().encode(MAGIC), 0)
  new DataView(head.buffer).setUint32(8, json.byteLength, true)
  head.set(json, 12)
  return [head, ...blocks]
}

/** @throws Error when the bytes are not a tree image, or a truncated one. */
export function decodeTreeImage(bytes: Uint8Array): DataTree {
  if (bytes.byteLength < 12 || new TextDecoder().decode(bytes.subarray(0, 8)) !== MAGIC) throw new Error('not a pgwasm tree image')
  const jsonLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(8, true)
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + jsonLength))) as Header
  const offsets = new Array<number>(header.lengths.length + 1)
  let at = 12 + jsonLength
  for (let i = 0; i < header.lengths.length; i++) {
    offsets[i + 1] = at
    at += header.lengths[i]!
  }
  if (at !== bytes.byteLength) throw new Error(`tree image is ${bytes.byteLength} bytes, its header describes ${at}`)
  const out: TreeEntry[] = []
  for (const [path, mode, mtimeMs, size, refs] of header.entries) {
    if (size < 0) {
      out.push({ path, mode, mtimeMs })
      continue
    }
    // A file whose blocks are stored in order, none zero or shared, is a
    // view of the image: no copy (files are copied on their first write).
    let contiguous = refs.length > 0
    for (let i = 1; contiguous && i < refs.length; i++) contiguous = refs[i] === refs[0]! + i
    if (contiguous && refs[0] !== 0) {
      const start = offsets[refs[0]!]!
      out.push({ path, mode, mtimeMs, data: bytes.subarray(start, start + size) })
      continue
    }
    const data = new Uint8Array(size)
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i]!
      if (ref === 0) continue
      const start = offsets[ref]!
      data.set(bytes.subarray(start, start + header.lengths[ref - 1]!), i * BLOCK)
    }
    out.push({ path, mode, mtimeMs, data })
  }
  return out
}

/** FNV-1a over the block: a map key, confirmed by a byte comparison. */
function hashOf(bytes: Uint8Array): number {
  let h = 0x811c9dc5
  for (let i = 0; i < bytes.byteLength; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193)
  return h >>> 0
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false
  return true
}

const images = new WeakMap<DataTree, Uint8Array>()

/** Notes that `tree` is exactly what `image` (an encoded image) decodes to, so a store can keep those bytes instead. */
export function rememberImage(tree: DataTree, image: Uint8Array): void {
  images.set(tree, image)
}

/** The encoded image `tree` was decoded from, if it was. */
export function imageOf(tree: DataTree): Uint8Array | undefined {
  return images.get(tree)
}

/** Inflates and decodes a gzipped image, remembering the image (see {@link imageOf}). */
export async function unpackGzippedImage(gzipped: Uint8Array): Promise<DataTree> {
  const image = await inflateGzip(gzipped)
  const tree = decodeTreeImage(image)
  rememberImage(tree, image)
  return tree
}

/**
 * gunzip that, in a browser, inflates in slices with a task boundary
 * between them (see {@link gunzipStream}).
 */
export async function inflateGzip(gzipped: Uint8Array): Promise<Uint8Array> {
  if (typeof DecompressionStream !== 'function' || typeof Response !== 'function' || inNode) return gunzip(gzipped)
  return new Uint8Array(await new Response(gunzipStream(gzipped)).arrayBuffer())
}

/**
 * The inflated bytes as a stream that feeds the `DecompressionStream` 128 kB
 * of input at a time, each slice in its own task. Over one in-memory chunk
 * the whole inflate runs as one microtask chain that holds the thread
 * (~100 ms for the engine): meanwhile no IndexedDB or Web Lock callback can
 * run, so an `idb://` reopen could not even start reading.
 */
export function gunzipStream(gzipped: Uint8Array): ReadableStream<Uint8Array<ArrayBuffer>> {
  let at = 0
  const source = new ReadableStream<Uint8Array<ArrayBuffer>>({
    async pull(controller) {
      if (at > 0) await nextTask()
      const end = Math.min(at + INFLATE_SLICE, gzipped.byteLength)
      controller.enqueue(gzipped.subarray(at, end) as Uint8Array<ArrayBuffer>)
      at = end
      if (at >= gzipped.byteLength) controller.close()
    },
  })
  return source.pipeThrough(new DecompressionStream('gzip'))
}

const INFLATE_SLICE = 128 * 1024

/**
 * Resolves in a later task (not a microtask), without setTimeout's 4 ms
 * clamp on nested timers. Not `scheduler.yield()`: its continuations go
 * before other tasks, which is what the slicing is meant to let run.
 * Shared with the LZMA decoder's slices (lzma.ts).
 */
export function nextTask(): Promise<void> {
  if (typeof MessageChannel !== 'function') return new Promise((resolve) => setTimeout(resolve, 0))
  return new Promise((resolve) => {
    const channel = new MessageChannel()
    channel.port1.onmessage = () => {
      channel.port1.close()
      resolve()
    }
    channel.port2.postMessage(null)
  })
}

