import { build } from 'esbuild'
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { dirname, extname, join, normalize } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { WebKitSession, callFirefoxPage, findFirefox, findWebKit, launchFirefox } from '@pgwasm/test-support/browsers'
import { CHROMIUM_FLAGS, callPageApi } from '@pgwasm/test-support/chromium'
import { findChromium } from '@pgwasm/test-support/required-tools'
import { errorText, type SuiteRun } from '../harness.js'
import { BENCH_DIR, CACHE_DIR } from '../paths.js'
import type { BrowserBenchApi } from './browser-page.js'
import { firstVisitRows } from './browser-first-visit.js'

/**
 * pgwasm's browser build against PGlite's in Debian's headless Chromium:
 * in-memory create in a fresh page, idb:// first create, reopen after a
 * reload, and a committed insert + select by pk on idb:// with default and
 * relaxed durability. Each library is served from 127.0.0.1 with the same
 * page code; each sample that needs a cold page gets a new browser context
 * (empty IndexedDB, empty HTTP cache).
 */

export const OURS = 'pgwasm (browser build)'
export const ANCHOR = 'PGlite'
export const BROWSER_PATHS = [OURS, ANCHOR]
/** The same libraries in Debian's Firefox ESR and WebKitGTK, for the store rows ({@link FIREFOX_CASES}, {@link WEBKIT_CASES}). */
export const OURS_FIREFOX = `${OURS}, Firefox`
export const ANCHOR_FIREFOX = `${ANCHOR}, Firefox`
export const FIREFOX_PATHS = [OURS_FIREFOX, ANCHOR_FIREFOX]
export const CREATE_MEMORY = 'in-memory create, first in a new page'
export const CREATE_MEMORY_LATER = 'in-memory create, later in the page'
export const IDB_FIRST = 'idb:// first create'
export const IDB_REOPEN = 'idb:// reopen after a reload'
export const IDB_WRITE = 'idb:// insert + select by pk (durable default)'
export const IDB_WRITE_RELAXED = 'idb:// insert + select by pk (relaxedDurability)'
export const WORKER_DIRECT = 'in-memory insert + select by pk, main thread'
export const WORKER_VIA = 'in-memory insert + select by pk, through a worker'
export const WORKER_DIRECT_ISOLATED = 'in-memory insert + select by pk, main thread, cross-origin isolated page'
export const WORKER_VIA_ISOLATED = 'in-memory insert + select by pk, through a worker, cross-origin isolated page'
export const TAB_LEADER = 'idb:// insert + select by pk through a worker, leading tab'
export const TAB_FOLLOWER = 'idb:// insert + select by pk through a worker, second tab (forwarded to the leader)'
export const TAB_FAILOVER = 'leading tab closed: longest wait for an answer in the other tab'
export const OPFS_WRITE = 'opfs-ahp:// insert + select by pk through a worker (durable default)'
export const OPFS_REOPEN = 'opfs-ahp:// reopen in a new worker, first query answered'
export const IDB_WORKER_WRITE = 'idb:// insert + select by pk through a worker (durable default)'
export const IDB_WORKER_REOPEN = 'idb:// reopen in a new worker, first query answered'
/** The stores timed through a worker: scheme, insert + select case, reopen case. */
const WORKER_STORES = [
  ['opfs-ahp', OPFS_WRITE, OPFS_REOPEN],
  ['idb', IDB_WORKER_WRITE, IDB_WORKER_REOPEN],
] as const
export const BROWSER_CASES = [
  CREATE_MEMORY,
  CREATE_MEMORY_LATER,
  IDB_FIRST,
  IDB_REOPEN,
  IDB_WRITE,
  IDB_WRITE_RELAXED,
  WORKER_DIRECT,
  WORKER_VIA,
  WORKER_DIRECT_ISOLATED,
  WORKER_VIA_ISOLATED,
  TAB_LEADER,
  TAB_FOLLOWER,
  TAB_FAILOVER,
  OPFS_WRITE,
  OPFS_REOPEN,
  IDB_WORKER_WRITE,
  IDB_WORKER_REOPEN,
]
/** How long a follower tab may go unanswered after its leader closed before the row fails. */
const FAILOVER_LIMIT_MS = 5_000
/** What makes a page cross-origin isolated (and so gives it SharedArrayBuffer). */
const ISOLATION_HEADERS = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' }

const TYPES: Record<string, string> = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html', '.data': 'application/octet-stream', '.gz': 'application/gzip' }

interface Impl {
  label: string
  side: 'ours' | 'anchor'
  /** Path of the page on the server. */
  page: string
  /** Path of the worker script. */
  worker: string
}

type Api = BrowserBenchApi

function call<K extends keyof Api>(page: Page, fn: K, ...args: Parameters<Api[K]>): Promise<Awaited<ReturnType<Api[K]>>> {
  return callPageApi(page, 'benchApi', fn, args)
}

export async function run(s: SuiteRun): Promise<void> {
  const scale = s.config.scale
  const coldSamples = Math.max(1, Math.min(s.config.iterations ?? 3, 5))
  const writeOps = Math.max(3, Math.round(20 * Math.min(scale, 1)))
  const workerOps = Math.max(10, Math.round(200 * Math.min(scale, 1)))
  Object.assign(s.settings, { coldSamplesPerRow: coldSamples, insertSelectOpsPerSample: writeOps, workerOpsPerRound: workerOps, workerOpsPerSample: 20 })
  const markAll = (status: 'skipped' | 'failed', reason: string, impls: Pick<Impl, 'label' | 'side'>[] = [{ label: OURS, side: 'ours' }, { label: ANCHOR, side: 'anchor' }]) => {
    for (const c of BROWSER_CASES) if (s.wants(c)) for (const i of impls) s.mark({ case: c, path: i.label, side: i.side, unit: 'ms', status, reason })
  }
  const executablePath = findChromium()
  if (!executablePath) return markAll('skipped', `no Chromium at ${process.env.PGWASM_CHROMIUM ?? '/usr/bin/chromium'} (apt-get install chromium, or set PGWASM_CHROMIUM)`)
  const { chromium } = await import('playwright-core')
  const require = createRequire(join(BENCH_DIR, 'package.json'))
  const pgliteDist = dirname(require.resolve('@electric-sql/pglite'))
  const ourAssets = join(dirname(require.resolve('@pgwasm/pglite')), 'browser', 'assets')
  const out = join(CACHE_DIR, 'browser')
  mkdirSync(out, { recursive: true })
  const bundle = (entry: string, outfile: string, anchor: boolean) =>
    build({
      entryPoints: [join(BENCH_DIR, 'src', 'suites', entry)],
      outfile,
      bundle: true,
      format: 'esm',
      platform: 'browser',
      logLevel: 'error',
      // PGlite's package does not bundle for the browser without help (node:module), so its page imports its own ES modules.
      plugins: anchor
        ? [
            {
              name: 'anchor',
              setup: (b) => {
                b.onResolve({ filter: /^@pgwasm\/pglite$/ }, () => ({ path: '/pglite/index.js', external: true }))
                b.onResolve({ filter: /^@pgwasm\/pglite\/worker$/ }, () => ({ path: '/pglite/worker/index.js', external: true }))
              },
            },
          ]
        : [],
    })
  await Promise.all([
    bundle('browser-page.ts', join(out, 'ours.js'), false),
    bundle('browser-page.ts', join(out, 'pglite.js'), true),
    bundle('browser-worker.ts', join(out, 'ours-worker.js'), false),
    bundle('browser-worker.ts', join(out, 'pglite-worker.js'), true),
  ])
  const files: Record<string, string> = {
    '/ours.js': join(out, 'ours.js'),
    '/anchor.js': join(out, 'pglite.js'),
    '/ours-worker.js': join(out, 'ours-worker.js'),
    '/anchor-worker.js': join(out, 'pglite-worker.js'),
  }
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname
    const html = (src: string) => `<!doctype html><meta charset="utf-8"><script type="module" src="${src}"></script>`
    let body: string | Buffer | undefined
    if (path === '/ours.html' || path === '/ours-isolated.html') body = html('/ours.js')
    else if (path === '/anchor.html' || path === '/anchor-isolated.html') body = html('/anchor.js')
    else if (files[path]) body = readFileSync(files[path]!)
    else if (path.startsWith('/assets/')) {
      // pgwasm's engine assets, beside its page's script as an app serves them.
      const file = normalize(join(ourAssets, path.slice('/assets/'.length)))
      if (file.startsWith(ourAssets) && existsSync(file)) body = readFileSync(file)
    } else if (path.startsWith('/pglite/')) {
      const file = normalize(join(pgliteDist, path.slice('/pglite/'.length)))
      if (file.startsWith(pgliteDist) && existsSync(file)) body = readFileSync(file)
    }
    if (body === undefined) {
      res.writeHead(404).end()
      return
    }
    // Every file may be loaded by an isolated page (its workers need the embedder policy too); only the -isolated pages opt in.
    const isolation = path.endsWith('.html') ? (path.endsWith('-isolated.html') ? ISOLATION_HEADERS : {}) : ISOLATION_HEADERS
    res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream', 'cross-origin-resource-policy': 'same-origin', ...isolation })
    res.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const impls: Impl[] = [
    { label: OURS, side: 'ours', page: '/ours.html', worker: '/ours-worker.js' },
    { label: ANCHOR, side: 'anchor', page: '/anchor.html', worker: '/anchor-worker.js' },
  ]
  let browser: Browser | undefined
  try {
    browser = await chromium.launch({ executablePath, args: CHROMIUM_FLAGS, headless: true })
    const samples = new Map<string, number[]>()
    const failed = new Map<string, string>()
    const tabFailed = new Map<string, string>()
    const failoverFailed = new Map<string, string>()
    const tabCases = new Set([TAB_LEADER, TAB_FOLLOWER, TAB_FAILOVER])
    /** `<library>|<case>` of a worker-store row that failed, and why. */
    const storeFailed = new Map<string, string>()
    const push = (c: string, impl: Impl, values: number[]) => {
      const key = `${c}|${impl.label}`
      samples.set(key, [...(samples.get(key) ?? []), ...values])
    }
    const openPage = async (context: BrowserContext, impl: Impl): Promise<Page> => {
      const page = await context.newPage()
      await page.goto(origin + impl.page)
      await page.waitForFunction(() => 'benchApi' in globalThis, undefined, { timeout: 60_000 })
      return page
    }
    /** Two tabs of one context on one idb:// database, each through its own worker: the follower forwards to the leader; then the leader closes. */
    const tabRows = async (context: BrowserContext, impl: Impl, round: number): Promise<void> => {
      const name = `tabs-${round}`
      const leader = await openPage(context, impl)
      const follower = await openPage(context, impl)
      // The first tab's database is open (a write went through) before the second tab opens it.
      // (PGlite's isLeader can miss its worker's leader-now message, so it is not asked.)
      await call(leader, 'tabOpen', impl.worker, name)
      await call(follower, 'tabOpen', impl.worker, name)
      // Warm both paths first, then alternate blocks.
      await call(leader, 'tabInsertSelect', 1_000_000, writeOps)
      await call(follower, 'tabInsertSelect', 2_000_000, writeOps)
      for (let block = 0; block < 2; block++) {
        push(TAB_LEADER, impl, await call(leader, 'tabInsertSelect', block * 10_000, writeOps))
        push(TAB_FOLLOWER, impl, await call(follower, 'tabInsertSelect', 100_000 + block * 10_000, writeOps))
      }
      if (!s.wants(TAB_FAILOVER) || failoverFailed.has(impl.label)) return
      await failover(leader, follower).then(
        (gap) => push(TAB_FAILOVER, impl, [gap]),
        (err: unknown) => failoverFailed.set(impl.label, errorText(err)),
      )
    }
    const failover = async (leader: Page, follower: Page): Promise<number> => {
      await call(follower, 'tabStartProbe')
      await new Promise((resolve) => setTimeout(resolve, 200))
      await leader.close()
      await call(follower, 'tabMark')
      // Answers after the close: the first few may still come from the closing tab's worker, so wait for many.
      const until = Date.now() + FAILOVER_LIMIT_MS
      while ((await call(follower, 'tabAnswersSinceMark')) < 50) {
        if (Date.now() > until) throw new Error(`the second tab got no answers for ${FAILOVER_LIMIT_MS} ms after the first one closed`)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await new Promise((resolve) => setTimeout(resolve, 300))
      return call(follower, 'tabStopProbe')
    }
    // A filter that names none of these rows (the first-visit ones, say) skips their rounds.
    for (let round = 0; round < (BROWSER_CASES.some((c) => s.wants(c)) ? coldSamples : 0); round++) {
      // Alternate who goes first, so drift lands on both.
      for (const impl of round % 2 === 0 ? impls : [...impls].reverse()) {
        if (failed.has(impl.label)) continue
        const context = await browser.newContext()
        try {
          s.progress(`round ${round + 1}/${coldSamples}: ${impl.label}`)
          const page = await openPage(context, impl)
          if (s.wants(CREATE_MEMORY) || s.wants(CREATE_MEMORY_LATER)) {
            push(CREATE_MEMORY, impl, [await call(page, 'createMemory')])
            push(CREATE_MEMORY_LATER, impl, [await call(page, 'createMemory'), await call(page, 'createMemory')])
          }
          push(IDB_FIRST, impl, [await call(page, 'openIdb', 'bench', false)])
          push(IDB_WRITE, impl, await call(page, 'insertSelect', 'bench', 0, writeOps))
          // No close: a reload is what a user does; committed rows must be there after it.
          await page.reload()
          await page.waitForFunction(() => 'benchApi' in globalThis, undefined, { timeout: 60_000 })
          push(IDB_REOPEN, impl, [await call(page, 'openIdb', 'bench', false)])
          const rows = await call(page, 'count', 'bench')
          if (rows !== writeOps) throw new Error(`after the reload idb://bench has ${rows} rows, ${writeOps} were committed`)
          await call(page, 'close', 'bench')
          await call(page, 'openIdb', 'relaxed', true)
          push(IDB_WRITE_RELAXED, impl, await call(page, 'insertSelect', 'relaxed', 0, writeOps))
          await call(page, 'close', 'relaxed')
          if (s.wants(WORKER_DIRECT) || s.wants(WORKER_VIA)) {
            const w = await call(page, 'workerVsDirect', impl.worker, workerOps)
            push(WORKER_DIRECT, impl, w.direct)
            push(WORKER_VIA, impl, w.worker)
          }
          if (s.wants(WORKER_DIRECT_ISOLATED) || s.wants(WORKER_VIA_ISOLATED)) {
            const isolated = await openPage(context, { ...impl, page: impl.page.replace('.html', '-isolated.html') })
            if (!(await isolated.evaluate(() => globalThis.crossOriginIsolated))) throw new Error('the -isolated page is not cross-origin isolated')
            const w = await call(isolated, 'workerVsDirect', impl.worker, workerOps)
            push(WORKER_DIRECT_ISOLATED, impl, w.direct)
            push(WORKER_VIA_ISOLATED, impl, w.worker)
          }
          for (const [scheme, write, reopen] of WORKER_STORES) {
            if ((!s.wants(write) && !s.wants(reopen)) || storeFailed.has(`${impl.label}|${write}`)) continue
            // One store's failure costs that store's rows only.
            await call(page, 'workerStore', impl.worker, `${scheme}://store-${round}`, writeOps).then(
              (r) => {
                push(write, impl, r.ops)
                push(reopen, impl, [r.reopenMs])
              },
              (err: unknown) => {
                for (const c of [write, reopen]) storeFailed.set(`${impl.label}|${c}`, errorText(err))
              },
            )
          }
          if ((s.wants(TAB_LEADER) || s.wants(TAB_FOLLOWER) || s.wants(TAB_FAILOVER)) && !tabFailed.has(impl.label)) {
            // A library whose tabs fail loses those rows only.
            await tabRows(context, impl, round).catch((err: unknown) => tabFailed.set(impl.label, errorText(err)))
          }
        } catch (err) {
          failed.set(impl.label, errorText(err))
        } finally {
          await context.close()
        }
      }
    }
    for (const c of BROWSER_CASES) {
      if (!s.wants(c)) continue
      for (const impl of impls) {
        const reason = failed.get(impl.label) ?? (tabCases.has(c) ? tabFailed.get(impl.label) : undefined) ?? storeFailed.get(`${impl.label}|${c}`)
        const values = samples.get(`${c}|${impl.label}`) ?? []
        const noFailover = c === TAB_FAILOVER ? failoverFailed.get(impl.label) : undefined
        if (reason !== undefined) s.mark({ case: c, path: impl.label, side: impl.side, unit: 'ms', status: 'failed', reason })
        // The anchor's tabs not recovering is a finding about it, not a broken run; ours not recovering is a failure.
        else if (noFailover !== undefined && impl.side === 'anchor') s.mark({ case: c, path: impl.label, side: impl.side, unit: 'ms', status: 'skipped', reason: `no failover to time: ${noFailover}` })
        else if (noFailover !== undefined) s.mark({ case: c, path: impl.label, side: impl.side, unit: 'ms', status: 'failed', reason: noFailover })
        else s.add({ case: c, path: impl.label, side: impl.side, unit: 'ms', samples: values, ...(impl.side === 'anchor' ? { vs: OURS } : {}) })
      }
    }
    const ratio = (name: string, c: string) => s.ratio(name, { case: c, path: OURS }, { case: c, path: ANCHOR })
    ratio('browser: durable idb insert+select, pgwasm / PGlite (target <= 0.1)', IDB_WRITE)
    ratio('browser: idb reopen after reload, pgwasm / PGlite (target <= 0.5)', IDB_REOPEN)
    ratio('browser: first idb create, pgwasm / PGlite (target <= 0.25)', IDB_FIRST)
    ratio('browser: in-memory create in a new page, pgwasm / PGlite (target <= 0.25)', CREATE_MEMORY)
    s.ratio('browser: worker overhead, pgwasm through a worker / pgwasm main thread (target <= 2)', { case: WORKER_VIA, path: OURS }, { case: WORKER_DIRECT, path: OURS })
    s.ratio(
      'browser: worker overhead on a cross-origin isolated page (shared-memory lane), pgwasm through a worker / pgwasm main thread (target <= 2)',
      { case: WORKER_VIA_ISOLATED, path: OURS },
      { case: WORKER_DIRECT_ISOLATED, path: OURS },
    )
    s.ratio(
      'browser: worker overhead on a cross-origin isolated page, PGlite through a worker / PGlite main thread',
      { case: WORKER_VIA_ISOLATED, path: ANCHOR },
      { case: WORKER_DIRECT_ISOLATED, path: ANCHOR },
    )
    s.ratio('browser: worker overhead, PGlite through a worker / PGlite main thread', { case: WORKER_VIA, path: ANCHOR }, { case: WORKER_DIRECT, path: ANCHOR })
    s.ratio('browser: second tab / leading tab, pgwasm (target <= 2)', { case: TAB_FOLLOWER, path: OURS }, { case: TAB_LEADER, path: OURS })
    s.ratio('browser: second tab / leading tab, PGlite', { case: TAB_FOLLOWER, path: ANCHOR }, { case: TAB_LEADER, path: ANCHOR })
    ratio('browser: second tab insert + select, pgwasm / PGlite', TAB_FOLLOWER)
    ratio('browser: failover wait, pgwasm / PGlite (pgwasm target <= 500 ms)', TAB_FAILOVER)
    ratio('browser: durable opfs-ahp:// insert + select through a worker, pgwasm / PGlite', OPFS_WRITE)
    ratio('browser: opfs-ahp:// reopen in a new worker, pgwasm / PGlite', OPFS_REOPEN)
    s.ratio('browser: opfs-ahp:// / idb:// insert + select through a worker, pgwasm', { case: OPFS_WRITE, path: OURS }, { case: IDB_WORKER_WRITE, path: OURS })
    await firstVisitRows(s, browser, join(out, 'first-visit'), coldSamples)
    await otherBrowserRows(s, origin, impls, { coldSamples, writeOps })
    s.notes.push(
      `Chromium: ${browser.version()}. Each round is a new browser context (cold HTTP cache, empty IndexedDB) per library; the libraries alternate.`,
      "Worker rows: each library's own worker API (pgwasm's PGliteWorker, PGlite's PGliteWorker) on an in-memory database in a module worker, against the same library on the page's thread, alternating; each sample is one block of 20 insert + select ops divided by 20, since Chromium's timer has 0.1 ms resolution without cross-origin isolation (single-op samples read 0.2 vs 0.5 ms where blocks show ~0.16 vs ~0.5). A worker op costs two postMessage round trips, ~0.05-0.1 ms each in this Chromium even for an empty reply. The cross-origin isolated rows run the same in a page served with COOP/COEP headers, where pgwasm's PGliteWorker sends calls through shared memory (a round trip ~0.03-0.04 ms here against 0.09-0.17 ms by postMessage).",
      'Tab rows: two tabs of one browser context open the same idb:// database, each through its own PGliteWorker (each library its own). The first leads; the second forwards its calls to it. The failover row: the second tab calls select 1 one call after another while the first tab is closed; the sample is the longest time between two answered calls.',
      "Store rows: each library's PGliteWorker in a new module worker on a new opfs-ahp:// (or idb://) database, insert + select by pk after as many unmeasured ops; the reopen row closes it and times a new worker's open and first answered query.",
      'PGlite is served as its own dist/ ES modules (it does not bundle for the browser without extra setup); pgwasm as a plain esbuild bundle, its engine assets served beside it.',
    )
  } catch (err) {
    markAll('failed', errorText(err))
  } finally {
    await browser?.close()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** One page of a browser beside Chromium, driven for the store rows. */
interface StorePage {
  call<K extends keyof Api>(fn: K, ...args: Parameters<Api[K]>): Promise<Awaited<ReturnType<Api[K]>>>
  reload(): Promise<void>
  close(): Promise<void>
}

/** Firefox or WebKit, as the store rows drive it. */
interface StoreBrowser {
  readonly name: string
  readonly version: string
  /** The store rows it measures: idb:// on the page, then a store through a worker (its scheme and rows). */
  readonly worker: readonly [scheme: string, write: string, reopen: string]
  /** A fresh page at `url` (a new browser context where the browser has them). */
  page(url: string): Promise<StorePage>
  close(): Promise<void>
}

async function firefox(): Promise<StoreBrowser> {
  const browser = await launchFirefox()
  const version = await browser.version()
  return {
    name: 'Firefox',
    version: `${version}, over WebDriver BiDi (puppeteer-core)`,
    worker: ['opfs-ahp', OPFS_WRITE, OPFS_REOPEN],
    async page(url) {
      const context = await browser.createBrowserContext()
      const page = await context.newPage()
      const ready = () => page.waitForFunction(() => 'benchApi' in globalThis, { timeout: 60_000 })
      await page.goto(url)
      await ready()
      return {
        call: (fn, ...args) => callFirefoxPage(page, 'benchApi', fn, args),
        reload: async () => {
          await page.reload()
          await ready()
        },
        close: () => context.close(),
      }
    },
    close: () => browser.close(),
  }
}

async function webkit(): Promise<StoreBrowser> {
  const session = await WebKitSession.start()
  return {
    name: 'WebKit',
    version: 'WebKitGTK MiniBrowser over WebDriver (WebKitWebDriver, Xvfb); it has no origin private file system, so its worker rows are idb://',
    worker: ['idb', IDB_WORKER_WRITE, IDB_WORKER_REOPEN],
    async page(url) {
      await session.open(url, 'benchApi')
      return {
        call: (fn, ...args) => session.call('benchApi', fn, args),
        reload: () => session.open(url, 'benchApi'),
        close: async () => {},
      }
    },
    close: () => session.close(),
  }
}

/** The store rows measured beside Chromium: Firefox's, with opfs-ahp:// through a worker. */
export const FIREFOX_CASES = [IDB_FIRST, IDB_WRITE, IDB_REOPEN, OPFS_WRITE, OPFS_REOPEN]
/** WebKit's: WebKitGTK has no origin private file system, so its worker rows are idb://. */
export const WEBKIT_CASES = [IDB_FIRST, IDB_WRITE, IDB_REOPEN, IDB_WORKER_WRITE, IDB_WORKER_REOPEN]
export const OURS_WEBKIT = `${OURS}, WebKit`
export const ANCHOR_WEBKIT = `${ANCHOR}, WebKit`
export const WEBKIT_PATHS = [OURS_WEBKIT, ANCHOR_WEBKIT]

/**
 * The store rows in Debian's Firefox ESR and WebKitGTK, beside PGlite in the
 * same browser: each round a fresh page per library (a new browser context
 * in Firefox; new database names in WebKit, whose driver has one), the
 * libraries alternating, the same page code as in Chromium.
 */
async function otherBrowserRows(s: SuiteRun, origin: string, impls: Impl[], { coldSamples, writeOps }: { coldSamples: number; writeOps: number }): Promise<void> {
  const browsers = [
    { name: 'Firefox', cases: FIREFOX_CASES, ours: OURS_FIREFOX, anchor: ANCHOR_FIREFOX, installed: findFirefox() !== undefined, start: firefox, missing: 'apt-get install firefox-esr, or set PGWASM_FIREFOX' },
    { name: 'WebKit', cases: WEBKIT_CASES, ours: OURS_WEBKIT, anchor: ANCHOR_WEBKIT, installed: findWebKit() !== undefined, start: webkit, missing: 'apt-get install webkit2gtk-driver xvfb' },
  ]
  for (const b of browsers) {
    const labelled = impls.map((impl) => ({ ...impl, label: impl.side === 'ours' ? b.ours : b.anchor }))
    const wanted = b.cases.filter((c) => s.wants(c))
    if (wanted.length === 0) continue
    const mark = (status: 'skipped' | 'failed', reason: string, impl: Pick<Impl, 'label' | 'side'>) => {
      for (const c of wanted) s.mark({ case: c, path: impl.label, side: impl.side, unit: 'ms', status, reason })
    }
    if (!b.installed) {
      for (const impl of labelled) mark('skipped', `no ${b.name} (${b.missing})`, impl)
      continue
    }
    let browser: StoreBrowser | undefined
    const samples = new Map<string, number[]>()
    const failed = new Map<string, string>()
    const push = (c: string, impl: Impl, values: number[]) => samples.set(`${c}|${impl.label}`, [...(samples.get(`${c}|${impl.label}`) ?? []), ...values])
    try {
      browser = await b.start()
      const [scheme, workerWrite, workerReopen] = browser.worker
      for (let round = 0; round < coldSamples; round++) {
        for (const impl of round % 2 === 0 ? labelled : [...labelled].reverse()) {
          if (failed.has(impl.label)) continue
          s.progress(`${b.name} round ${round + 1}/${coldSamples}: ${impl.label}`)
          const page = await browser.page(origin + impl.page)
          try {
            const db = `bench-${impl.side}-${round}`
            push(IDB_FIRST, impl, [await page.call('openIdb', db, false)])
            push(IDB_WRITE, impl, await page.call('insertSelect', db, 0, writeOps))
            await page.reload()
            push(IDB_REOPEN, impl, [await page.call('openIdb', db, false)])
            const rows = await page.call('count', db)
            if (rows !== writeOps) throw new Error(`after the reload idb://${db} has ${rows} rows, ${writeOps} were committed`)
            await page.call('close', db)
            const store = await page.call('workerStore', impl.worker, `${scheme}://store-${impl.side}-${round}`, writeOps)
            push(workerWrite, impl, store.ops)
            push(workerReopen, impl, [store.reopenMs])
          } catch (err) {
            failed.set(impl.label, errorText(err))
          } finally {
            await page.close()
          }
        }
      }
      for (const impl of labelled) {
        const reason = failed.get(impl.label)
        if (reason !== undefined) {
          mark('failed', reason, impl)
          continue
        }
        for (const c of wanted) {
          s.add({ case: c, path: impl.label, side: impl.side, unit: 'ms', samples: samples.get(`${c}|${impl.label}`) ?? [], ...(impl.side === 'anchor' ? { vs: b.ours } : {}) })
        }
      }
      const ratio = (what: string, c: string) => s.ratio(`browser, ${b.name}: ${what}, pgwasm / PGlite`, { case: c, path: b.ours }, { case: c, path: b.anchor })
      ratio('durable idb insert+select', IDB_WRITE)
      ratio('idb reopen after reload', IDB_REOPEN)
      ratio('first idb create', IDB_FIRST)
      ratio(`durable ${scheme}:// insert + select through a worker`, workerWrite)
      ratio(`${scheme}:// reopen in a new worker`, workerReopen)
      s.notes.push(`${b.name}: ${browser.version}; the store rows only, each round a fresh page per library.`)
    } catch (err) {
      for (const impl of labelled) mark('failed', errorText(err), impl)
    } finally {
      await browser?.close()
    }
  }
}
