import { gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { loadAssets } from '../src/engine/loading/assets.js'
import type { DataTree } from '../src/engine/files/pgdata-tree.js'
import { getTemplate } from '../src/engine/start/template.js'
import { decodeTreeImage, encodeTreeImage, imageOf, unpackGzippedImage } from '../src/engine/files/tree-image.js'

const DIR = 0o40700
const FILE = 0o100600
const BLOCK = 8192

function bytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length)
  for (let i = 0; i < length; i++) out[i] = ((i * 31 + seed) % 251) + 1
  return out
}

/** Compares trees by value (a Buffer and a Uint8Array with the same bytes are equal). */
function plain(tree: DataTree): unknown[] {
  return tree.map((e) => ({ path: e.path, mode: e.mode, mtimeMs: e.mtimeMs, data: e.data ? Array.from(e.data) : undefined }))
}

describe('tree image (the browser build template format)', () => {
  it('round-trips directories, empty files, zero blocks, shared blocks and short tails', () => {
    const page = bytes(BLOCK, 1)
    const withHole = new Uint8Array(3 * BLOCK + 17)
    withHole.set(page, 0)
    withHole.set(bytes(17, 9), 3 * BLOCK)
    const tree: DataTree = [
      { path: 'base', mode: DIR, mtimeMs: 1_700_000_000_000 },
      { path: 'base/1', mode: DIR, mtimeMs: 1_700_000_000_001 },
      { path: 'base/1/a', mode: FILE, mtimeMs: 5, data: withHole },
      // The same blocks again at another path, and in another order.
      { path: 'base/1/b', mode: FILE, mtimeMs: 6, data: withHole.slice() },
      { path: 'base/1/c', mode: FILE, mtimeMs: 7, data: new Uint8Array([...bytes(BLOCK, 2), ...page]) },
      { path: 'base/1/empty', mode: FILE, mtimeMs: 8, data: new Uint8Array(0) },
      { path: 'base/1/zeros', mode: FILE, mtimeMs: 9, data: new Uint8Array(5 * BLOCK) },
      { path: 'PG_VERSION', mode: FILE, mtimeMs: 10, data: new TextEncoder().encode('18\n') },
    ]
    const image = encodeTreeImage(tree)
    // Each distinct non-zero block once: page, its 17-byte tail, the other page, PG_VERSION.
    expect(image.byteLength).toBeLessThan(3 * BLOCK + 17 + 3 + 2048)
    expect(plain(decodeTreeImage(image))).toEqual(plain(tree))
  })

  it('rejects bytes that are not an image, and a truncated one', () => {
    expect(() => decodeTreeImage(new TextEncoder().encode('not an image at all'))).toThrow(/not a pgwasm tree image/)
    const image = encodeTreeImage([{ path: 'f', mode: FILE, mtimeMs: 1, data: bytes(3 * BLOCK, 4) }])
    expect(() => decodeTreeImage(image.subarray(0, image.byteLength - 100))).toThrow(/header describes/)
  })

  it('holds the initdb template byte for byte, in far fewer bytes than its files', async () => {
    const template = await getTemplate(await loadAssets())
    const image = encodeTreeImage(template)
    const fileBytes = template.reduce((n, e) => n + (e.data?.byteLength ?? 0), 0)
    expect(image.byteLength).toBeLessThan(fileBytes / 2)
    const gz = gzipSync(image)
    const tree = await unpackGzippedImage(gz)
    expect(Buffer.from(imageOf(tree)!).equals(Buffer.from(image))).toBe(true)
    expect(tree.length).toBe(template.length)
    for (let i = 0; i < tree.length; i++) {
      const [a, b] = [tree[i]!, template[i]!]
      expect({ path: a.path, mode: a.mode, mtimeMs: a.mtimeMs }).toEqual({ path: b.path, mode: b.mode, mtimeMs: b.mtimeMs })
      expect(a.data === undefined).toBe(b.data === undefined)
      if (a.data && b.data) expect(Buffer.from(a.data).equals(Buffer.from(b.data))).toBe(true)
    }
  }, 120_000)
})
