/**
 * gzip for the engine's tree images (tree-image.ts), data-directory dumps
 * and extension bundles. Node's zlib runs on the thread pool (a 40 MB
 * directory would otherwise block the event loop for hundreds of ms);
 * elsewhere the standard `CompressionStream` does the work.
 */
import { inNode } from '../node-builtin.js'

interface Zlib {
  gzip(input: Uint8Array, options: { level: number }, done: (err: Error | null, out: Uint8Array) => void): void
  gunzip(input: Uint8Array, done: (err: Error | null, out: Uint8Array) => void): void
}

let zlib: Promise<Zlib> | undefined

function nodeZlib(): Promise<Zlib> {
  zlib ??= import('node:zlib') as Promise<Zlib>
  return zlib
}

/** Compresses `bytes` (level 6: a data directory is mostly zero pages, which any level shrinks). */
export async function gzip(bytes: Uint8Array): Promise<Uint8Array> {
  if (inNode) {
    const z = await nodeZlib()
    return new Promise((resolve, reject) => z.gzip(bytes, { level: 6 }, (err, out) => (err ? reject(err) : resolve(out))))
  }
  return viaStream(bytes, new CompressionStream('gzip'))
}

/** Decompresses a gzip stream; rejects on corrupt input. */
export async function gunzip(bytes: Uint8Array): Promise<Uint8Array> {
  if (inNode) {
    const z = await nodeZlib()
    return new Promise((resolve, reject) => z.gunzip(bytes, (err, out) => (err ? reject(err) : resolve(out))))
  }
  return viaStream(bytes, new DecompressionStream('gzip'))
}

async function viaStream(bytes: Uint8Array, transform: CompressionStream | DecompressionStream): Promise<Uint8Array> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(transform)
  return new Uint8Array(await new Response(stream).arrayBuffer())
}
