import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { eventually } from '@pgwasm/test-support/async'
import { WebKitSession } from '@pgwasm/test-support/browsers'
import type { TestApi } from './browser/app.js'
import type { TabsApi } from './browser/tabs.js'
import { serveTestPages } from './fixtures/test-pages.js'

/**
 * The browser build in WebKit: Debian's WebKitGTK MiniBrowser over
 * WebDriver (WebKitWebDriver, on an Xvfb display), with the pages the
 * Chromium and Firefox suites drive, for each feature of the README's
 * support table. WebKitGTK has no origin private file system, so
 * `opfs-ahp://` is asserted to be refused with an error that says to use
 * `idb://`.
 */

let pages: Awaited<ReturnType<typeof serveTestPages>>
let webkit: WebKitSession

const app = <K extends keyof TestApi>(fn: K, ...args: Parameters<TestApi[K]>): Promise<Awaited<ReturnType<TestApi[K]>>> => webkit.call('pgwasmTest', fn, args)
const tabs = <K extends keyof TabsApi>(fn: K, ...args: Parameters<TabsApi[K]>): Promise<Awaited<ReturnType<TabsApi[K]>>> => webkit.call('pgwasmTabs', fn, args)
const openApp = (): Promise<void> => webkit.open(`${pages.origin}/`, 'pgwasmTest')

beforeAll(async () => {
  pages = await serveTestPages()
  webkit = await WebKitSession.start()
}, 120_000)

afterAll(async () => {
  await webkit?.close()
  await pages?.close()
})

describe('browser build in WebKit (WebKitGTK)', () => {
  it('runs the engine on the page: queries, a second create from the pool, the browser pool sizes', async () => {
    await openApp()
    const r = await app('memory')
    expect(r.rows).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ])
    expect(r).toMatchObject({ second: 1, pool: '16MB', customPool: '32MB' })
  }, 120_000)

  it('fetches what Postgres reads only on use (a time zone, text search, an encoding, PL/pgSQL, ICU) when used, on the page and in a worker', async () => {
    await openApp()
    const expected = { paris: '14:00 CEST', tsvector: "'brown':3 'fox':4 'quick':2", latin1: 'e9', plpgsql: 42, icu: true }
    expect(await app('filesOnUse', 'page')).toMatchObject(expected)
    expect(await app('filesOnUse', 'worker')).toMatchObject(expected)
  }, 120_000)

  it('idb:// keeps committed rows across a reload without close, and reopens', async () => {
    await openApp()
    const name = `reload-${Date.now()}`
    await app('idbWrite', name, ['first', 'second'])
    await openApp()
    expect((await app('idbRead', name, false)).bodies).toEqual(['first', 'second'])
    await app('idbWrite', name, ['third'])
    expect((await app('idbRead', name)).bodies).toEqual(['first', 'second', 'third'])
  }, 120_000)

  it('opfs-ahp:// is refused, on the page and in a worker, with an error that names idb:// instead (WebKitGTK has no origin private file system)', async () => {
    await openApp()
    const name = `opfs-${Date.now()}`
    expect(await app('opfsOnPage', name)).toMatchObject({ name: 'EngineError', code: 'BAD_DATA_DIR', message: expect.stringMatching(/does not offer here .* use idb:\/\//) })
    await expect(app('opfsViaWorker', name, ['one'])).rejects.toThrow(/needs the origin private file system .* use idb:\/\//)
  }, 120_000)

  it('the worker mode: a PGliteWorker on idb:// returns values and typed errors, and its rows outlive a reload', async () => {
    await openApp()
    const name = `worker-${Date.now()}`
    const first = await app('viaWorker', name, ['one', 'two'])
    expect(first.rows).toEqual(['one', 'two'])
    expect(first.error).toMatchObject({ name: 'DatabaseError', code: '22012', isDatabaseError: true })
    await openApp()
    expect((await app('viaWorker', name, ['three'])).rows).toEqual(['one', 'two', 'three'])
  }, 120_000)

  it('extensions in the page: pg_trgm with its GIN index, hstore, and pgvector from a bundle URL with its HNSW index', async () => {
    await openApp()
    const r = await app('contrib', `contrib-${Date.now()}`)
    expect(r.similarity).toBeGreaterThan(0)
    expect(r.plan).toMatch(/words_trgm/)
    expect(r.found[0]).toBe('word42')
    expect(r.value).toBe('2')
    expect(r.nearest).toEqual([3, 4, 2])
    expect(r.vectorPlan).toMatch(/items_hnsw/)
  }, 120_000)

  it('stops runaway statements with 57014 and bounds memory with 53200 and 53100', async () => {
    await openApp()
    const r = await app('runaways')
    for (const stop of r.stopped) expect(stop).toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' })
    expect(r).toMatchObject({ memory: '53200', table: '53100', after: 1000 })
  }, 120_000)

  it('two tabs on one idb:// database: one leads, both write, a live query follows, and the other takes over when the leader closes', async () => {
    const name = `tabs-${Date.now()}`
    const first = await webkit.window()
    await webkit.open(`${pages.origin}/tabs`, 'pgwasmTabs')
    expect(await tabs('open', name)).toBe(true)
    const second = await webkit.newWindow()
    await webkit.open(`${pages.origin}/tabs`, 'pgwasmTabs')
    expect(await tabs('open', name)).toBe(false)
    await tabs('exec', 'create table shared_rows (v int primary key)')
    await webkit.switchTo(first)
    await tabs('query', 'insert into shared_rows values ($1)', [1])
    await webkit.switchTo(second)
    await tabs('liveQuery', 'all', 'select v from shared_rows order by v')
    await tabs('query', 'insert into shared_rows values ($1)', [2])
    await eventually(async () => JSON.stringify(await tabs('shown', 'all')) === JSON.stringify([{ v: 1 }, { v: 2 }]), 10_000, "the follower's live query to show both rows")
    await webkit.switchTo(first)
    await webkit.closeWindow()
    await webkit.switchTo(second)
    await eventually(() => tabs('isLeader'), 20_000, 'the second tab to take over')
    expect(await tabs('query', 'select v from shared_rows order by v')).toEqual([{ v: 1 }, { v: 2 }])
  }, 120_000)
})
