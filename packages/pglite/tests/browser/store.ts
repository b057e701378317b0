// A second test page for tests/browser.test.ts: the idb:// store's on-disk
// formats, checked through the package's own modules (not only its public
// entry) and raw IndexedDB.
import { PGlite } from '@pgwasm/pglite'
import { IdbStore } from '../../src/fs/idb-store.js'
import { CHUNK_BYTES } from '../../src/engine/files/memfs-journal.js'
import type { DataTree } from '../../src/engine/files/pgdata-tree.js'
import { encodeTreeImage, rememberImage } from '../../src/engine/files/tree-image.js'
import { readDataDirArchive } from '../../src/fs/dump.js'

const DIR = 0o40700
const FILE = 0o100600

function pattern(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length)
  for (let i = 0; i < length; i++) out[i] = ((i * 7 + seed) % 251) + 1
  return out
}

function idbRequest<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result)
    req.onerror = () => reject(req.error)
  })
}

function openRaw(name: string, version?: number, upgrade?: (db: IDBDatabase) => void): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name, version)
    req.onupgradeneeded = () => upgrade?.(req.result)
    req.onsuccess = () => resolve(req.result)
    req.onerror = () => reject(req.error)
  })
}

/** What a raw look at a store finds: its IndexedDB version, format, base image and chunk count. */
async function inspect(name: string): Promise<{ version: number; format: number; hasBase: boolean; chunks: number }> {
  const db = await openRaw(`pgwasm/${name}`)
  try {
    const stores = ['meta', 'chunks', ...(db.objectStoreNames.contains('base') ? ['base'] : [])]
    const tx = db.transaction(stores, 'readonly')
    const meta = (await idbRequest(tx.objectStore('meta').get('meta'))) as { format: number }
    const chunks = await idbRequest(tx.objectStore('chunks').count())
    const base = stores.includes('base') ? await idbRequest(tx.objectStore('base').count()) : 0
    return { version: db.version, format: meta.format, hasBase: base > 0, chunks }
  } finally {
    db.close()
  }
}

const api = {
  /**
   * A store made from a tree with a base image: what changes over the base
   * (a chunk zeroed, a chunk rewritten, a file replaced by a shorter one,
   * one removed) reads back after a reopen, and untouched files read as the base.
   */
  async baseImage() {
    const a = pattern(3 * CHUNK_BYTES + 100, 1)
    const tree: DataTree = [
      { path: 'd', mode: DIR, mtimeMs: 1 },
      { path: 'd/a', mode: FILE, mtimeMs: 2, data: a },
      { path: 'd/b', mode: FILE, mtimeMs: 3, data: pattern(2 * CHUNK_BYTES, 2) },
      { path: 'd/c', mode: FILE, mtimeMs: 4, data: a.slice() },
      { path: 'd/gone', mode: FILE, mtimeMs: 5, data: pattern(10, 3) },
    ]
    rememberImage(tree, encodeTreeImage(tree))
    const store = await IdbStore.open('image-format')
    await store.create(tree, 'test')
    const created = await inspect('image-format')
    await store.apply(
      {
        upserts: [
          { path: 'd/a', mode: FILE, size: a.byteLength, mtimeMs: 6 },
          { path: 'd/b', mode: FILE, size: 10, mtimeMs: 7, replaced: true },
        ],
        deletes: ['d/gone'],
        chunks: [
          { path: 'd/a', index: 1, bytes: null },
          { path: 'd/a', index: 2, bytes: pattern(CHUNK_BYTES, 9) },
          { path: 'd/b', index: 0, bytes: pattern(10, 5) },
          { path: 'd/b', index: -1, bytes: null },
        ],
      },
      'strict',
    )
    store.close()
    const reopened = await IdbStore.open('image-format')
    const loaded = (await reopened.load())!
    reopened.close()
    const expectA = a.slice()
    expectA.fill(0, CHUNK_BYTES, 2 * CHUNK_BYTES)
    expectA.set(pattern(CHUNK_BYTES, 9), 2 * CHUNK_BYTES)
    const same = (x: Uint8Array | undefined, y: Uint8Array) => !!x && x.byteLength === y.byteLength && x.every((v, i) => v === y[i])
    const file = (path: string) => loaded.find((e) => e.path === path)
    return {
      created,
      after: await inspect('image-format'),
      paths: loaded.map((e) => e.path),
      a: same(file('d/a')?.data, expectA),
      b: same(file('d/b')?.data, pattern(10, 5)),
      c: same(file('d/c')?.data, a),
      mtimeA: file('d/a')?.mtimeMs,
    }
  },

  /**
   * A store in the first layout (IndexedDB version 1: files and non-zero
   * chunks, no base image), written by hand from a dump, opens, takes
   * writes and keeps them across a reopen.
   */
  async legacyStore(dumpUrl: string) {
    const tree = await readDataDirArchive(await (await fetch(dumpUrl)).blob())
    const db = await openRaw('pgwasm/legacy', 1, (d) => {
      for (const s of ['meta', 'files', 'chunks']) d.createObjectStore(s)
    })
    const tx = db.transaction(['meta', 'files', 'chunks'], 'readwrite')
    tx.objectStore('meta').put({ format: 1, pgMajor: '18', engineVersion: 'legacy' }, 'meta')
    for (const e of tree) {
      const size = e.data?.byteLength ?? 0
      tx.objectStore('files').put({ mode: e.mode, size, mtimeMs: e.mtimeMs }, e.path)
      for (let c = 0; c * CHUNK_BYTES < size; c++) {
        const chunk = e.data!.slice(c * CHUNK_BYTES, Math.min(size, (c + 1) * CHUNK_BYTES))
        if (chunk.some((v) => v !== 0)) tx.objectStore('chunks').put(chunk, [e.path, c])
      }
    }
    await new Promise<void>((resolve, reject) => {
      tx.oncomplete = () => resolve()
      tx.onerror = () => reject(tx.error)
    })
    db.close()
    const pg = await PGlite.create('idb://legacy')
    const before = (await pg.query<{ n: number }>('select count(*)::int as n from items')).rows[0]!.n
    await pg.query(`insert into items (name, price) values ('after the upgrade', 2)`)
    await pg.close()
    const again = await PGlite.create('idb://legacy')
    const after = (await again.query<{ n: number; last: string }>(`select count(*)::int as n, max(name) filter (where price = 2) as last from items`)).rows[0]!
    await again.close()
    return { before, after, store: await inspect('legacy') }
  },

  /** A store a newer pgwasm wrote (a higher IndexedDB version) is refused, not touched. */
  async futureStore() {
    const db = await openRaw('pgwasm/future', 3, (d) => d.createObjectStore('meta'))
    db.close()
    try {
      await PGlite.create('idb://future')
      return { opened: true }
    } catch (err) {
      const raw = await openRaw('pgwasm/future')
      const version = raw.version
      raw.close()
      return { opened: false, name: (err as Error).name, version }
    }
  },
}

Object.assign(globalThis, { pgwasmStoreTest: api })
export type StoreTestApi = typeof api
