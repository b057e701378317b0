import type { Browser, Page } from 'puppeteer-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { eventually } from '@pgwasm/test-support/async'
import { callFirefoxPage, launchFirefox, openFirefoxPage } from '@pgwasm/test-support/browsers'
import type { TestApi } from './browser/app.js'
import type { TabsApi } from './browser/tabs.js'
import { serveTestPages } from './fixtures/test-pages.js'

/**
 * The browser build in real headless Firefox (Debian's `firefox-esr`, over
 * WebDriver BiDi): the pages the Chromium suites drive (tests/browser/),
 * bundled with plain esbuild options and served on 127.0.0.1, for each
 * feature of the README's support table.
 */

let pages: Awaited<ReturnType<typeof serveTestPages>>
let origin: string
let browser: Browser

const app = (page: Page) =>
  <K extends keyof TestApi>(fn: K, ...args: Parameters<TestApi[K]>): Promise<Awaited<ReturnType<TestApi[K]>>> =>
    callFirefoxPage(page, 'pgwasmTest', fn, args)
const tabs = (page: Page) =>
  <K extends keyof TabsApi>(fn: K, ...args: Parameters<TabsApi[K]>): Promise<Awaited<ReturnType<TabsApi[K]>>> =>
    callFirefoxPage(page, 'pgwasmTabs', fn, args)

beforeAll(async () => {
  pages = await serveTestPages()
  origin = pages.origin
  browser = await launchFirefox()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await pages?.close()
})

describe('browser build in Firefox', () => {
  it('runs the engine on the page: queries, a second create from the pool, the browser pool sizes', async () => {
    const page = await openFirefoxPage(browser, `${origin}/`, 'pgwasmTest')
    const r = await app(page)('memory')
    expect(r.rows).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ])
    expect(r).toMatchObject({ second: 1, pool: '16MB', customPool: '32MB' })
    await page.close()
  }, 120_000)

  it('fetches what Postgres reads only on use (a time zone, text search, an encoding, PL/pgSQL, ICU) when used, on the page and in a worker', async () => {
    const page = await openFirefoxPage(browser, `${origin}/`, 'pgwasmTest')
    const expected = { paris: '14:00 CEST', tsvector: "'brown':3 'fox':4 'quick':2", latin1: 'e9', plpgsql: 42, icu: true }
    expect(await app(page)('filesOnUse', 'page')).toMatchObject(expected)
    expect(await app(page)('filesOnUse', 'worker')).toMatchObject(expected)
    await page.close()
  }, 120_000)

  it('idb:// keeps committed rows across a reload without close, and reopens', async () => {
    const page = await openFirefoxPage(browser, `${origin}/`, 'pgwasmTest')
    const name = `reload-${Date.now()}`
    await app(page)('idbWrite', name, ['first', 'second'])
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    expect((await app(page)('idbRead', name, false)).bodies).toEqual(['first', 'second'])
    await app(page)('idbWrite', name, ['third'])
    expect((await app(page)('idbRead', name)).bodies).toEqual(['first', 'second', 'third'])
    await page.close()
  }, 120_000)

  it('opfs-ahp:// in a worker keeps rows across a reload, and on the page is refused with a clear error', async () => {
    const page = await openFirefoxPage(browser, `${origin}/`, 'pgwasmTest')
    const name = `opfs-${Date.now()}`
    expect(await app(page)('opfsViaWorker', name, ['one', 'two'])).toEqual(['one', 'two'])
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    expect(await app(page)('opfsViaWorker', name, ['three'])).toEqual(['one', 'two', 'three'])
    expect(await app(page)('opfsOnPage', name)).toMatchObject({ name: 'EngineError', code: 'BAD_DATA_DIR', message: expect.stringMatching(/needs a dedicated worker/) })
    await page.close()
  }, 120_000)

  it('the worker mode: a PGliteWorker on idb:// returns values and typed errors, and its rows outlive a reload', async () => {
    const page = await openFirefoxPage(browser, `${origin}/`, 'pgwasmTest')
    const name = `worker-${Date.now()}`
    const first = await app(page)('viaWorker', name, ['one', 'two'])
    expect(first.rows).toEqual(['one', 'two'])
    expect(first.error).toMatchObject({ name: 'DatabaseError', code: '22012', isDatabaseError: true })
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    expect((await app(page)('viaWorker', name, ['three'])).rows).toEqual(['one', 'two', 'three'])
    await page.close()
  }, 120_000)

  it('extensions in the page: pg_trgm with its GIN index, hstore, and pgvector from a bundle URL with its HNSW index', async () => {
    const page = await openFirefoxPage(browser, `${origin}/`, 'pgwasmTest')
    const r = await app(page)('contrib', `contrib-${Date.now()}`)
    expect(r.similarity).toBeGreaterThan(0)
    expect(r.plan).toMatch(/words_trgm/)
    expect(r.found[0]).toBe('word42')
    expect(r.value).toBe('2')
    expect(r.nearest).toEqual([3, 4, 2])
    expect(r.vectorPlan).toMatch(/items_hnsw/)
    await page.close()
  }, 120_000)

  it('stops runaway statements with 57014 and bounds memory with 53200 and 53100', async () => {
    const page = await openFirefoxPage(browser, `${origin}/`, 'pgwasmTest')
    const r = await app(page)('runaways')
    for (const stop of r.stopped) expect(stop).toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' })
    expect(r).toMatchObject({ memory: '53200', table: '53100', after: 1000 })
    await page.close()
  }, 120_000)

  it('two tabs on one idb:// database: one leads, both write, a live query follows, and the other takes over when the leader closes', async () => {
    const name = `tabs-${Date.now()}`
    const a = await openFirefoxPage(browser, `${origin}/tabs`, 'pgwasmTabs')
    const b = await openFirefoxPage(browser, `${origin}/tabs`, 'pgwasmTabs')
    expect(await tabs(a)('open', name)).toBe(true)
    expect(await tabs(b)('open', name)).toBe(false)
    await tabs(b)('exec', 'create table shared_rows (v int primary key)')
    await tabs(a)('query', 'insert into shared_rows values ($1)', [1])
    await tabs(b)('liveQuery', 'all', 'select v from shared_rows order by v')
    await tabs(b)('query', 'insert into shared_rows values ($1)', [2])
    await eventually(async () => JSON.stringify(await tabs(b)('shown', 'all')) === JSON.stringify([{ v: 1 }, { v: 2 }]), 10_000, "the follower's live query to show both rows")
    await a.close()
    await eventually(() => tabs(b)('isLeader'), 20_000, 'the second tab to take over')
    expect(await tabs(b)('query', 'select v from shared_rows order by v')).toEqual([{ v: 1 }, { v: 2 }])
    await b.close()
  }, 120_000)
})
