import { createServer, type Server } from 'node:http'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { assetType, callPageApi, closeChromium, launchWithProfile, serveToChromium } from '@pgwasm/test-support/chromium'
import { hostileSideModule } from '@pgwasm/test-support/hostile-side-module'
import { findChromium } from '@pgwasm/test-support/required-tools'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import type { TestApi } from './browser/app.js'
import type { StoreTestApi } from './browser/store.js'
import { PGlite } from '../src/index.js'

/**
 * The browser build in real headless Chromium (Debian's `chromium`): a page
 * bundled with plain esbuild options, served on 127.0.0.1, driven through
 * `window.pgwasmTest`. Asserts on values only.
 */

const here = dirname(fileURLToPath(import.meta.url))
const pkgDir = join(here, '..')
// Undefined when missing (or PGWASM_SIMULATE_MISSING names it): the suite then fails, in CI and out.
const CHROMIUM = findChromium()

let out: string
/** A database dumped in Node, served to the page. */
let nodeDump: Uint8Array
const BIG_BYTEA = 3 * 1024 * 1024
/** README blocks marked `// browser example`, run as pages of their own. */
const readmeExamples = [...readFileSync(join(pkgDir, 'README.md'), 'utf8').matchAll(/```js\n(\/\/ browser example[\s\S]*?)```/g)].map((m) => m[1]!)
const examplesDir = join(here, 'browser', '.examples')
let server: Server
let origin: string
let browser: Browser
let context: BrowserContext

type Api = TestApi
type Fn = keyof Api

function call<K extends Fn>(page: Page, fn: K, ...args: Parameters<Api[K]>): Promise<Awaited<ReturnType<Api[K]>>> {
  return callPageApi(page, 'pgwasmTest', fn, args)
}

async function openPage(): Promise<Page> {
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (err) => errors.push(err.message))
  await page.goto(`${origin}/`)
  await page.waitForFunction(() => 'pgwasmTest' in globalThis, undefined, { timeout: 20_000 }).catch((err: unknown) => {
    throw new Error(`the test page did not load: ${errors.join('; ') || String(err)}`)
  })
  return page
}

async function openStorePage(): Promise<Page> {
  const page = await context.newPage()
  await page.goto(`${origin}/store.html`)
  await page.waitForFunction(() => 'pgwasmStoreTest' in globalThis, undefined, { timeout: 20_000 })
  return page
}

function callStore<K extends keyof StoreTestApi>(page: Page, fn: K, ...args: Parameters<StoreTestApi[K]>): Promise<Awaited<ReturnType<StoreTestApi[K]>>> {
  return callPageApi(page, 'pgwasmStoreTest', fn, args)
}

beforeAll(async () => {
  if (!existsSync(join(pkgDir, 'dist', 'browser', 'index.js'))) throw new Error('build the package first (pnpm test does): dist/browser/ is missing')
  if (!CHROMIUM) {
    throw new Error(`no Chromium at ${process.env.PGWASM_CHROMIUM ?? '/usr/bin/chromium'}: apt-get install chromium (.ci/run does), or set PGWASM_CHROMIUM`)
  }
  out = tempDir('pgwasm-browser-')
  // What an app author runs, with no plugin or loader (the engine's assets are served beside it, below).
  await build({
    entryPoints: [join(here, 'browser', 'app.ts'), join(here, 'browser', 'pg-worker.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    outdir: out,
    logLevel: 'error',
  })
  // The store-format page imports the package's sources (their Node-only branches stay unresolved).
  await build({
    entryPoints: [join(here, 'browser', 'store.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    outdir: out,
    external: ['node:*'],
    logLevel: 'error',
  })
  // Beside the package (not in tmp), so `@pgwasm/pglite` resolves as it does for a user.
  mkdirSync(examplesDir, { recursive: true })
  const entries = readmeExamples.map((code, i) => {
    const file = join(examplesDir, `example-${i}.js`)
    writeFileSync(file, `${code}\nglobalThis.__exampleDone = true\n`)
    return file
  })
  if (entries.length > 0) await build({ entryPoints: entries, bundle: true, format: 'esm', platform: 'browser', outdir: out, logLevel: 'error' })
  const source = await PGlite.create()
  await source.exec(`
    create table items (id serial primary key, name text not null, price numeric(10,2));
    create index items_name on items (name);
    insert into items (name, price) select 'item ' || g, g * 1.25 from generate_series(1, 500) g;
    create sequence ticket start 41;
    select nextval('ticket');
    create table blobs (id int primary key, data bytea);
    insert into blobs values (1, (select string_agg(decode(md5(g::text), 'hex'), ''::bytea) from generate_series(1, ${BIG_BYTEA / 16}) g));
  `)
  nodeDump = new Uint8Array(await (await source.dumpDataDir('gzip')).arrayBuffer())
  await source.close()
  const assets = join(pkgDir, 'dist', 'browser', 'assets')
  const vectorBundle = fileURLToPath((await (await import('@electric-sql/pglite-pgvector')).vector.setup(undefined as never, {})).bundlePath)
  const app = readFileSync(join(out, 'app.js'))
  const workerScript = readFileSync(join(out, 'pg-worker.js'))
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1')
    // `/isolated` is the page made cross-origin isolated; every file may load in it, so every file carries the embedder policy.
    const isolation = url.pathname === '/isolated' ? { 'cross-origin-opener-policy': 'same-origin' } : {}
    const send = (status: number, type: string, body: string | Uint8Array) => {
      res.writeHead(status, {
        'content-type': type,
        'content-length': Buffer.byteLength(body),
        'cross-origin-embedder-policy': 'require-corp',
        'cross-origin-resource-policy': 'same-origin',
        ...isolation,
      })
      res.end(body)
    }
    if (url.pathname === '/favicon.ico') return send(204, 'image/x-icon', '')
    if (url.pathname === '/' || url.pathname === '/isolated') return send(200, 'text/html', '<!doctype html><meta charset="utf-8"><script type="module" src="/app.js"></script>')
    if (url.pathname === '/app.js') return send(200, 'text/javascript', app)
    if (url.pathname === '/store.html') return send(200, 'text/html', '<!doctype html><meta charset="utf-8"><script type="module" src="/store.js"></script>')
    if (url.pathname === '/store.js') return send(200, 'text/javascript', readFileSync(join(out, 'store.js')))
    if (url.pathname === '/pg-worker.js') return send(200, 'text/javascript', workerScript)
    if (url.pathname === '/node-dump.tgz') return send(200, 'application/gzip', nodeDump)
    // pgvector's bundle as @electric-sql/pglite-pgvector publishes it, served beside the page.
    if (url.pathname === '/vector.tar.gz') return send(200, 'application/gzip', readFileSync(vectorBundle))
    const example = /^\/(example-\d+)\.(html|js)$/.exec(url.pathname)
    if (example) {
      if (example[2] === 'html') return send(200, 'text/html', `<!doctype html><meta charset="utf-8"><script type="module" src="/${example[1]}.js"></script>`)
      return send(200, 'text/javascript', readFileSync(join(out, `${example[1]}.js`)))
    }
    const [, dir, ...rest] = url.pathname.split('/')
    // The engine's assets, as an app serves them beside its script (nested: share/, contrib/).
    const name = rest.join('/')
    const asset = /^[\w-]+(\/[\w-]+)*(\.[\w]+)+$/.test(name) ? join(assets, name) : undefined
    if (dir === 'assets' && asset && statSync(asset, { throwIfNoEntry: false })?.isFile()) {
      return send(200, assetType(name), readFileSync(asset))
    }
    if (dir === 'truncated' && asset && existsSync(asset)) return send(200, 'application/octet-stream', readFileSync(asset).subarray(0, 4096))
    // A single-page-app server that answers every path with its index page.
    if (dir === 'spa') return send(200, 'text/html', '<!doctype html><title>app</title>')
    send(404, 'text/plain', 'not found')
  })
  ;({ origin, browser, context } = await serveToChromium(server))
}, 120_000)

afterAll(async () => {
  await closeChromium(browser, server)
  rmSync(examplesDir, { recursive: true, force: true })
})

describe('browser build in Chromium', () => {
  it('has README browser examples', () => {
    expect(readmeExamples.length).toBeGreaterThanOrEqual(1)
  })

  readmeExamples.forEach((code, i) => {
    it(`README browser example ${i + 1} prints what it says`, async () => {
      const expected = [...code.matchAll(/console\.log\(.*\/\/ → (.*)$/gm)].map((m) => JSON.parse(m[1]!) as unknown)
      const page = await context.newPage()
      const printed: unknown[] = []
      const errors: string[] = []
      page.on('console', (msg) => {
        if (msg.type() === 'log') printed.push(JSON.parse(msg.text()) as unknown)
      })
      page.on('pageerror', (err) => errors.push(err.message))
      await page.goto(`${origin}/example-${i}.html`)
      await page.waitForFunction(() => '__exampleDone' in globalThis, undefined, { timeout: 60_000 }).catch(() => {
        throw new Error(`example ${i + 1} did not finish: ${errors.join('; ')}`)
      })
      expect(errors).toEqual([])
      expect(printed).toEqual(expected)
      await page.close()
    }, 120_000)
  })

  it('relaxedDurability on idb:// turns synchronous_commit off, and close() still writes everything', async () => {
    const page = await openPage()
    expect(await call(page, 'idbRelaxed', 'relaxed-db')).toEqual({ setting: 'off', count: 5 })
    await page.close()
  }, 120_000)

  it('hostile page SQL runs no script in the page and does not end the engine', async () => {
    const page = await openPage()
    const module = hostileSideModule(`globalThis.__pgwasmHostile = 'ran'; document.title = 'pwned'`)
    const r = await call(page, 'hostileSql', [...module])
    expect(r).toEqual({
      codes: { load: '42501', languageC: '42501', exitOnError: '22023', recursion: '54001', jsonb: '54001' },
      after: 1,
      ran: null,
      title: '',
    })
    await page.close()
  }, 120_000)

  it('runs an in-memory database from a plain esbuild bundle', async () => {
    const page = await openPage()
    const r = await call(page, 'memory')
    expect(r.rows).toEqual([
      { id: 1, v: 'a' },
      { id: 2, v: 'b' },
    ])
    expect(r.second).toBe(1)
    // The browser's smaller default pool, and the option that changes it.
    expect(r).toMatchObject({ pool: '16MB', customPool: '32MB' })
    await page.close()
  }, 120_000)

  it('a failed query rejects with DatabaseError and its SQLSTATE; the database stays usable', async () => {
    const page = await openPage()
    const r = await call(page, 'failingQuery')
    expect(r.rejected).toBe(true)
    expect(r.error).toMatchObject({ name: 'DatabaseError', code: '23505', isDatabaseError: true })
    expect(r.after).toBe(1)
    await page.close()
  }, 120_000)

  it('statement_timeout stops statements that never call out of the engine in the page, and maxMemory fails a statement with 53200 / 53100 while the instance goes on', async () => {
    const page = await openPage()
    const r = await call(page, 'runaways')
    // Each of them runs for minutes or for ever when not stopped.
    for (const stop of r.stopped) expect(stop).toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' })
    expect(r).toMatchObject({ memory: '53200', table: '53100', after: 1000 })
    await page.close()
  }, 120_000)

  it('idb:// keeps committed rows across a reload without close, and reopens', async () => {
    const page = await openPage()
    await call(page, 'idbWrite', 'reload-test', ['first', 'second'])
    // No close(): the promises resolved, so the rows must already be in IndexedDB.
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    const read = await call(page, 'idbRead', 'reload-test', false)
    expect(read.bodies).toEqual(['first', 'second'])
    // Writes after recovery land too, and a clean close keeps them.
    await call(page, 'idbWrite', 'reload-test', ['third'])
    const again = await call(page, 'idbRead', 'reload-test')
    expect(again.bodies).toEqual(['first', 'second', 'third'])
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    const last = await call(page, 'idbRead', 'reload-test')
    expect(last.bodies).toEqual(['first', 'second', 'third'])
    await page.close()
  }, 180_000)

  it("runs extensions in the page: pg_trgm with a GIN index and hstore on idb:// across a reopen, and pgvector's HNSW index from a bundle fetched by URL", async () => {
    const page = await openPage()
    const r = await call(page, 'contrib', `contrib-${Date.now()}`)
    expect(r.similarity).toBeGreaterThan(0)
    expect(r.similarity).toBeLessThan(1)
    expect(r.plan).toMatch(/words_trgm/)
    expect(r.found[0]).toBe('word42')
    expect(r.value).toBe('2')
    // pgvector from a bundle fetched by URL (bundlePath), with its HNSW index.
    expect(r.nearest).toEqual([3, 4, 2])
    expect(r.vectorPlan).toMatch(/items_hnsw/)
    // A second in-memory database with the bundle is a restore of the first one's start, and vectors work in it.
    expect(r.restored).toBe(true)
    expect(r.distance).toBe(2)
    await page.close()
  }, 120_000)

  it('idb:// opens again from IndexedDB after an engine death: committed rows kept, the open transaction gone, the instance goes on', async () => {
    const page = await openPage()
    const r = await call(page, 'idbEngineDeath', `death-${Date.now()}`)
    expect(r.died).toMatchObject({ name: 'EngineError', code: 'ENGINE_ABORT', reopened: true })
    expect(r.died?.message).toMatch(/opened again from IndexedDB/)
    expect(r.after).toEqual(['committed'])
    expect(r.stored).toEqual(['after', 'committed'])
    await page.close()
  }, 120_000)

  it('idb:// keeps a vacuum-truncated template table and later writes across a reload', async () => {
    const page = await openPage()
    const first = await call(page, 'idbTruncateCatalog', 'truncate-test')
    expect(first.before).toBeGreaterThan(500)
    expect(first.pages).toBe(0)
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    const read = await call(page, 'idbReadCatalog', 'truncate-test')
    expect(read).toMatchObject({ features: 0, kept: ['kept'] })
    expect(read.classes).toBeGreaterThan(400)
    await page.close()
  }, 180_000)

  it('idb:// stores a new database as its base image plus changed chunks, read back over the base', async () => {
    const page = await openStorePage()
    const r = await callStore(page, 'baseImage')
    expect(r.created).toEqual({ version: 2, format: 2, hasBase: true, chunks: 0 })
    expect(r.after).toEqual({ version: 2, format: 2, hasBase: true, chunks: 3 })
    expect(r.paths).toEqual(['d', 'd/a', 'd/b', 'd/c'])
    expect(r).toMatchObject({ a: true, b: true, c: true, mtimeA: 6 })
    await page.close()
  }, 120_000)

  it('an idb:// store in the first format (no base image) opens, takes writes and keeps them', async () => {
    const page = await openStorePage()
    const r = await callStore(page, 'legacyStore', `${origin}/node-dump.tgz`)
    expect(r.before).toBe(500)
    expect(r.after).toEqual({ n: 501, last: 'after the upgrade' })
    // Upgraded in place: the base store added, the data left in the first layout.
    expect(r.store).toMatchObject({ version: 2, format: 1, hasBase: false })
    expect(r.store.chunks).toBeGreaterThan(100)
    await page.close()
  }, 180_000)

  it('an idb:// store of a newer format is refused with IncompatibleDataDirError', async () => {
    const page = await openStorePage()
    expect(await callStore(page, 'futureStore')).toEqual({ opened: false, name: 'IncompatibleDataDirError', version: 3 })
    await page.close()
  }, 120_000)

  it('a second tab opening the same idb:// database gets DataDirLockedError', async () => {
    const first = await openPage()
    await call(first, 'idbWrite', 'two-tabs', ['x'])
    const second = await openPage()
    const r = await call(second, 'secondOpener', 'two-tabs')
    expect(r.opened).toBe(false)
    expect(r).toMatchObject({ isLocked: true, error: { name: 'DataDirLockedError' } })
    await first.close()
    await second.close()
  }, 180_000)

  it('a dump made in Node opens in the browser (idb://), and its dump opens back in Node', async () => {
    const page = await openPage()
    const r = await call(page, 'roundTrip', `${origin}/node-dump.tgz`)
    expect(r).toMatchObject({ n: 500, total: '156562.50', big: BIG_BYTEA, next: 42 })
    expect(r.plan).toContain('items_name')
    const back = await PGlite.create({ loadDataDir: Buffer.from(r.dump, 'base64') })
    try {
      const { rows } = await back.query<{ n: number; last: string; md5: string }>(
        `select count(*)::int as n, max(name) filter (where id = (select max(id) from items)) as last, (select md5(data) from blobs) as md5 from items`,
      )
      expect(rows[0]).toMatchObject({ n: 501, last: 'from the browser', md5: r.md5 })
      expect((await back.query<{ v: string }>(`select nextval('ticket')::text as v`)).rows[0]!.v).toBe('43')
    } finally {
      await back.close()
      await page.close()
    }
  }, 180_000)

  it('a table loaded past 32 MB on idb:// is dumped in the page and kept across a reopen', async () => {
    const page = await openPage()
    const big = await call(page, 'bigTable', `idb://big-${Date.now()}`, 40_000)
    expect(big.tableBytes).toBeGreaterThan(40 * 1024 * 1024)
    expect(big.dumpBytes).toBeGreaterThan(big.tableBytes)
    expect(big.n).toBe(40_000)
    expect(big.pad).toHaveLength(1024)
    await page.close()
  }, 180_000)

  it('a module worker runs idb:// across a reload, errors keep class and SQLSTATE, and nothing is logged', async () => {
    const page = await openPage()
    const logged: string[] = []
    page.on('console', (msg) => logged.push(`${msg.type()}: ${msg.text()}`))
    const first = await call(page, 'viaWorker', 'worker-db', ['one', 'two'])
    expect(first.rows).toEqual(['one', 'two'])
    expect(first.error).toMatchObject({ name: 'DatabaseError', code: '22012', isDatabaseError: true })
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    const second = await call(page, 'viaWorker', 'worker-db', ['three'])
    expect(second.rows).toEqual(['one', 'two', 'three'])
    expect(logged).toEqual([])
    await page.close()
  }, 180_000)

  it('opfs-ahp:// in a worker keeps committed rows across a reload and a torn trailing write, and is refused on the page with a clear error', async () => {
    const page = await openPage()
    const name = `opfs-${Date.now()}`
    expect(await call(page, 'opfsViaWorker', name, ['one', 'two'])).toEqual(['one', 'two'])
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    expect(await call(page, 'opfsViaWorker', name, ['three'])).toEqual(['one', 'two', 'three'])
    // A record a crash cut short (a header and half a payload): left out, nothing else lost.
    const torn = await call(page, 'opfsTear', name, [0x50, 0x47, 0x57, 0x4a, 2, 0, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7])
    expect(torn.size).toBeGreaterThan(0)
    expect(await call(page, 'opfsViaWorker', name, ['four'])).toEqual(['one', 'two', 'three', 'four'])
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    expect(await call(page, 'opfsViaWorker', name, [])).toEqual(['one', 'two', 'three', 'four'])
    // Past a generation's size limit, a flush starts a new generation from the
    // tree in memory and the old file goes: one file is left, and it holds all.
    const compacted = await call(page, 'opfsCompact', `${name}-big`, 150)
    expect(compacted).toMatchObject({ n: 15_001, last: 'after' })
    expect(compacted.files).toHaveLength(1)
    expect(compacted.files[0]!.name).toMatch(/^gen-([2-9]|\d\d+)$/)
    // A table past 32 MB in one statement (MEMFS grows files that large differently).
    expect(await call(page, 'opfsLoad', `${name}-load`, 40_000)).toEqual({ n: 40_000, bytes: expect.any(Number) })
    expect((await call(page, 'opfsLoad', `${name}-load`, 0)).bytes).toBeGreaterThan(40 * 1024 * 1024)
    expect(await call(page, 'opfsOnPage', name)).toMatchObject({ name: 'EngineError', code: 'BAD_DATA_DIR', message: expect.stringMatching(/needs a dedicated worker/) })
    await page.close()
  }, 180_000)

  it('keeps opfs-ahp:// and idb:// databases across a browser restart, also when the browser closed with them open', async () => {
    const profile = mkdtempSync(join(tmpdir(), 'pgwasm-profile-'))
    const inNewBrowser = async <T>(run: (page: Page) => Promise<T>): Promise<T> => {
      const restarted = await launchWithProfile(profile)
      try {
        const page = await restarted.newPage()
        await page.goto(`${origin}/`)
        await page.waitForFunction(() => 'pgwasmTest' in globalThis, undefined, { timeout: 20_000 })
        return await run(page)
      } finally {
        await restarted.close()
      }
    }
    try {
      await inNewBrowser(async (page) => {
        expect(await call(page, 'opfsViaWorker', 'restart', ['closed'])).toEqual(['closed'])
        expect(await call(page, 'viaWorker', 'restart', ['closed'])).toMatchObject({ rows: ['closed'] })
      })
      // Committed, then the browser goes with the databases still open in their workers.
      await inNewBrowser(async (page) => {
        await call(page, 'writeAndLeaveOpen', 'opfs-ahp://restart', ['open'])
        await call(page, 'writeAndLeaveOpen', 'idb://restart', ['open'])
      })
      await inNewBrowser(async (page) => {
        expect(await call(page, 'opfsViaWorker', 'restart', ['after'])).toEqual(['closed', 'open', 'after'])
        expect(await call(page, 'viaWorker', 'restart', ['after'])).toMatchObject({ rows: ['closed', 'open', 'after'] })
      })
    } finally {
      rmSync(profile, { recursive: true, force: true })
    }
  })

  it('a worker on a cross-origin isolated page takes the shared-memory lane, keeps values and errors, and persists across a reload', async () => {
    const page = await context.newPage()
    await page.goto(`${origin}/isolated`)
    await page.waitForFunction(() => 'pgwasmTest' in globalThis, undefined, { timeout: 20_000 })
    // From here on (the page's own load may log a missing favicon).
    const logged: string[] = []
    page.on('console', (msg) => logged.push(`${msg.type()}: ${msg.text()}`))
    const first = await call(page, 'viaWorkerShared', 'shared-lane', 60)
    expect(first).toMatchObject({ isolated: true, usesSharedMemory: true })
    // Calls made one after another nearly all go through shared memory.
    expect(first.stats.sharedCalls).toBeGreaterThan(40)
    expect(first.error).toMatchObject({ name: 'DatabaseError', code: '23505', isDatabaseError: true })
    expect(first.rows).toHaveLength(60)
    expect(first.rows[41]).toEqual({ id: 42, v: 'välue 42', b: [42, 7], at: '2024-05-06T07:08:09.123Z' })
    await page.reload()
    await page.waitForFunction(() => 'pgwasmTest' in globalThis)
    const second = await call(page, 'viaWorkerShared', 'shared-lane', 5)
    expect(second.rows.map((r) => r.id)).toEqual(Array.from({ length: 65 }, (_, i) => i + 1))
    // The same page without isolation has no shared memory: every call goes by message.
    const plain = await openPage()
    const fallback = await call(plain, 'viaWorkerShared', 'shared-lane-plain', 10)
    expect(fallback).toMatchObject({ isolated: false, usesSharedMemory: false, stats: { sharedCalls: 0 } })
    expect(fallback.rows).toHaveLength(10)
    expect(logged).toEqual([])
    await plain.close()
    await page.close()
  }, 180_000)

  it('loads the engine from assetBaseUrl, and a missing, truncated or mis-served asset rejects naming the URL', async () => {
    const page = await openPage()
    const ok = await call(page, 'withAssetBase', `${origin}/assets/`)
    expect(ok).toEqual({ ok: true, n: 2 })
    const missing = await call(page, 'withAssetBase', `${origin}/missing/`)
    expect(missing.ok).toBe(false)
    expect(missing.error).toMatchObject({ name: 'EngineError', code: 'ASSET_MISSING' })
    expect(missing.error!.message).toContain(`${origin}/missing/pglite.`)
    expect(missing.error!.message).toContain('404')
    const truncated = await call(page, 'withAssetBase', `${origin}/truncated/`)
    expect(truncated.error!.message).toMatch(/truncated\/pglite\.(wasm|data) is 4096 bytes/)
    const spa = await call(page, 'withAssetBase', `${origin}/spa/`)
    expect(spa.error!.message).toContain(`${origin}/spa/pglite.`)
    expect(spa.error!.message).toContain('text/html')
    await page.close()
  }, 120_000)
})
