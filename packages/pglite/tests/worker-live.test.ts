import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest'
import { ClosedError } from '../src/index.js'
import { live, LIVE_TRIGGER, type LiveNamespace } from '../src/live/index.js'
import { pg_trgm } from '../src/contrib/pg_trgm.js'
import { PGliteWorker, type PGliteWorkerExtension } from '../src/worker.js'
import { bundleFixtures } from './fixtures/bundle.js'
import { rejection } from './helpers.js'

/**
 * Live queries on the page side of a worker: `PGliteWorker.create(worker,
 * { extensions: { live } })`, as with `@electric-sql/pglite/worker`. The
 * worker is a real worker_threads thread running the real engine. Several
 * tabs on one database are tested in Chromium (browser-tabs.test.ts).
 */

const here = dirname(fileURLToPath(import.meta.url))
mkdirSync(join(here, '.cache'), { recursive: true })
const bundleDir = mkdtempSync(join(here, '.cache', 'worker-live-'))
const threads: Worker[] = []

function thread(): Worker {
  const t = new Worker(join(bundleDir, 'worker-host.mjs'))
  threads.push(t)
  return t
}

beforeAll(async () => {
  await bundleFixtures(join(here, 'fixtures'), ['worker-host'], bundleDir)
})

afterAll(async () => {
  await Promise.all(threads.map((t) => t.terminate()))
  rmSync(bundleDir, { recursive: true, force: true })
  const cache = join(here, '.cache')
  if (readdirSync(cache).length === 0) rmSync(cache, { recursive: true })
})

/** Resolves with the first value `read` gives that `done` accepts; fails after 10 s with the last one. */
async function until<T>(read: () => T, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const value = read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`still ${JSON.stringify(value)} after 10 s`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe('live queries over PGliteWorker', () => {
  it('gives pg.live on the page: a live query follows inserts, updates and deletes; unsubscribing drops its own trigger', { timeout: 30_000 }, async () => {
    const pg = await PGliteWorker.create(thread(), { extensions: { live } })
    expectTypeOf(pg.live).toEqualTypeOf<LiveNamespace>()
    await pg.exec('create table todo (id int primary key, title text)')
    let latest: string[] = []
    const lq = await pg.live.query<{ title: string }>('select title from todo order by id', [], (r) => (latest = r.rows.map((row) => row.title)))
    expect(lq.initialResults.rows).toEqual([])
    await pg.exec("insert into todo values (1, 'milk'), (2, 'bread')")
    await until(() => latest, (v) => v.length === 2)
    expect(latest).toEqual(['milk', 'bread'])
    await pg.query("update todo set title = 'rye' where id = 2")
    await until(() => latest, (v) => v[1] === 'rye')
    await pg.transaction(async (tx) => {
      await tx.query('delete from todo where id = 1')
    })
    expect(await until(() => latest, (v) => v.length === 1)).toEqual(['rye'])
    // Its trigger carries a tag of this page's: another tab's watch on the same table has its own name.
    const names = async (): Promise<string[]> =>
      (await pg.query<{ tgname: string }>("select tgname from pg_trigger where tgrelid = 'todo'::regclass")).rows.map((r) => r.tgname)
    const [name] = await names()
    expect(name).toMatch(new RegExp(`^${LIVE_TRIGGER}_[0-9a-f]{12}$`))
    await lq.unsubscribe()
    expect(await names()).toEqual([])
    await pg.close()
  })

  it('keeps incremental queries and changes working, and close() ends them before the database closes', { timeout: 30_000 }, async () => {
    const pg = await PGliteWorker.create(thread(), { extensions: { live } })
    await pg.exec('create table item (id int primary key, n int)')
    let rows: unknown[] = []
    const changes: unknown[] = []
    await pg.live.incrementalQuery<{ id: number; n: number }>('select id, n from item order by id', [], 'id', (r) => (rows = r.rows))
    await pg.live.changes('select id, n from item', [], 'id', (c) => changes.push(...c))
    await pg.exec('insert into item values (1, 10), (2, 20)')
    await until(() => rows, (v) => v.length === 2)
    await pg.exec('update item set n = 11 where id = 1')
    await until(() => rows, (v) => (v[0] as { n: number }).n === 11)
    // The changes feed is a live query of its own: its refresh may come after the incremental one's.
    await until(() => changes, (v) => v.some((c) => (c as { __op__: string }).__op__ === 'UPDATE'))
    await pg.close()
    expect(pg.closed).toBe(true)
    await expect(pg.live.query('select 1')).rejects.toThrow()
    await expect(pg.query('select 1')).rejects.toBeInstanceOf(ClosedError)
  })

  it('refuses add-ons that must load in the worker, with a TypeError that says where they go', async () => {
    expect(() => new PGliteWorker(thread(), { extensions: { pg_trgm } as unknown as Record<string, PGliteWorkerExtension> })).toThrow(
      /cannot run on the page.*worker's `init`/,
    )
    const bundled: PGliteWorkerExtension = { name: 'bundled', setup: async () => ({ bundlePath: 'file:///nowhere.tar.gz' }) }
    const pg = new PGliteWorker(thread(), { extensions: { bundled } })
    const err = await rejection(pg.waitReady)
    expect(err).toBeInstanceOf(TypeError)
    expect(String(err)).toMatch(/engine bundle: load it in the worker's `init`/)
    expect(pg.closed).toBe(true)
    await expect(pg.query('select 1')).rejects.toBeInstanceOf(ClosedError)
  })
})
