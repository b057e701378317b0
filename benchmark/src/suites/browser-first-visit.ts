import { build, type Plugin } from 'esbuild'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { dirname, extname, join, normalize, sep } from 'node:path'
import { gzipSync } from 'node:zlib'
import type { Browser } from 'playwright-core'
import { errorText, type SuiteRun } from '../harness.js'
import { BENCH_DIR } from '../paths.js'

/**
 * What a first visit costs (#34): a page that creates an in-memory
 * database and answers one query, in a new browser context (cold HTTP
 * cache), over Chromium's network emulation at 10 Mbit/s and 40 ms
 * (CDP `Network.emulateNetworkConditions`). The server gzips what it sends
 * (level 9, when that is smaller), as a web server set up for an app
 * would, and counts every byte; the rows are the bytes of the visit, raw
 * and as sent, and the time from navigation to the first query result.
 */

export const FIRST_VISIT_TIME = 'first visit: navigation to first query result, 10 Mbit/s, 40 ms latency'
export const FIRST_VISIT_RAW = 'first visit: bytes downloaded, uncompressed'
export const FIRST_VISIT_WIRE = 'first visit: bytes over the wire, gzip'
export const FIRST_VISIT_CASES = [FIRST_VISIT_TIME, FIRST_VISIT_RAW, FIRST_VISIT_WIRE]
export const OURS_DEFAULT = 'pgwasm (browser build)'
export const OURS_SINGLE_FILE = 'pgwasm (single-file build, @pgwasm/pglite/embedded)'
export const ANCHOR = 'PGlite'
export const FIRST_VISIT_PATHS = [OURS_DEFAULT, OURS_SINGLE_FILE, ANCHOR]

const TYPES: Record<string, string> = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' }
const MBIT = 1_000_000 / 8

interface Visit {
  label: string
  side: 'ours' | 'anchor'
  page: string
}

export async function firstVisitRows(s: SuiteRun, browser: Browser, out: string, samples: number): Promise<void> {
  const wanted = FIRST_VISIT_CASES.filter((c) => s.wants(c))
  if (wanted.length === 0) return
  const visits: Visit[] = [
    { label: OURS_DEFAULT, side: 'ours', page: '/default/' },
    { label: OURS_SINGLE_FILE, side: 'ours', page: '/single-file/' },
    { label: ANCHOR, side: 'anchor', page: '/anchor/' },
  ]
  const mark = (visit: Visit, reason: string) => {
    for (const c of wanted) s.mark({ case: c, path: visit.label, side: visit.side, unit: c === FIRST_VISIT_TIME ? 'ms' : 'MB', status: 'failed', reason })
  }
  const require = createRequire(join(BENCH_DIR, 'package.json'))
  const pgliteDist = dirname(require.resolve('@electric-sql/pglite'))
  const ourAssets = join(dirname(require.resolve('@pgwasm/pglite')), 'browser', 'assets')
  const page = (outdir: string, plugins: Plugin[]) =>
    build({ entryPoints: [join(BENCH_DIR, 'src', 'suites', 'first-visit-page.ts')], outdir, bundle: true, format: 'esm', platform: 'browser', logLevel: 'error', plugins })
  const singleFile: Plugin = {
    name: 'single-file',
    setup: (b) => b.onResolve({ filter: /^@pgwasm\/pglite$/ }, (a) => b.resolve('@pgwasm/pglite/embedded', { kind: a.kind, resolveDir: a.resolveDir })),
  }
  // PGlite's package does not bundle for the browser without help (node:module): its page imports its own ES modules.
  const anchor: Plugin = { name: 'anchor', setup: (b) => b.onResolve({ filter: /^@pgwasm\/pglite$/ }, () => ({ path: '/pglite/index.js', external: true })) }
  await Promise.all([page(join(out, 'default'), []), page(join(out, 'single-file'), [singleFile]), page(join(out, 'anchor'), [anchor])])

  const gzipped = new Map<string, Buffer>()
  const sent: { raw: number; wire: number }[] = []
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname
    const file = fileFor(path, out, ourAssets, pgliteDist)
    if (!file) {
      res.writeHead(404).end()
      return
    }
    const body = path.endsWith('/') ? Buffer.from(`<!doctype html><meta charset="utf-8"><script type="module" src="first-visit-page.js"></script>`) : readFileSync(file)
    let gz = gzipped.get(path)
    if (!gz) gzipped.set(path, (gz = gzipSync(body, { level: 9 })))
    const compress = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? '')) && gz.length < body.length
    const wire = compress ? gz : body
    sent.push({ raw: body.length, wire: wire.length })
    const type = path.endsWith('/') ? 'text/html' : (TYPES[extname(path)] ?? 'application/octet-stream')
    res.writeHead(200, { 'content-type': type, 'content-length': wire.length, ...(compress ? { 'content-encoding': 'gzip' } : {}) })
    res.end(wire)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const times = new Map<string, number[]>()
  const bytes = new Map<string, { raw: number; wire: number }>()
  const failed = new Map<string, string>()
  try {
    for (let round = 0; round < samples; round++) {
      for (const visit of round % 2 === 0 ? visits : [...visits].reverse()) {
        if (failed.has(visit.label)) continue
        s.progress(`first visit ${round + 1}/${samples}: ${visit.label}`)
        const context = await browser.newContext()
        try {
          const tab = await context.newPage()
          const cdp = await context.newCDPSession(tab)
          await cdp.send('Network.enable')
          await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 40, downloadThroughput: 10 * MBIT, uploadThroughput: 10 * MBIT })
          sent.length = 0
          await tab.goto(origin + visit.page)
          await tab.waitForFunction(() => 'firstResult' in globalThis, undefined, { timeout: 120_000 })
          const result = await tab.evaluate(() => (globalThis as unknown as { firstResult: { at: number; n: number } }).firstResult)
          if (result.n !== 2) throw new Error(`the first query answered ${result.n}`)
          times.set(visit.label, [...(times.get(visit.label) ?? []), result.at])
          bytes.set(visit.label, { raw: sent.reduce((n, f) => n + f.raw, 0), wire: sent.reduce((n, f) => n + f.wire, 0) })
        } catch (err) {
          failed.set(visit.label, errorText(err))
        } finally {
          await context.close()
        }
      }
    }
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  for (const visit of visits) {
    const reason = failed.get(visit.label)
    if (reason !== undefined) {
      mark(visit, reason)
      continue
    }
    const b = bytes.get(visit.label)!
    const vs = visit.side === 'anchor' ? { vs: OURS_DEFAULT } : {}
    if (s.wants(FIRST_VISIT_TIME)) s.add({ case: FIRST_VISIT_TIME, path: visit.label, side: visit.side, unit: 'ms', samples: times.get(visit.label) ?? [], ...vs })
    if (s.wants(FIRST_VISIT_RAW)) s.add({ case: FIRST_VISIT_RAW, path: visit.label, side: visit.side, unit: 'MB', samples: [b.raw / 1e6], ...vs })
    if (s.wants(FIRST_VISIT_WIRE)) s.add({ case: FIRST_VISIT_WIRE, path: visit.label, side: visit.side, unit: 'MB', samples: [b.wire / 1e6], ...vs })
  }
  s.ratio('browser: first visit to first query result at 10 Mbit/s, pgwasm / PGlite', { case: FIRST_VISIT_TIME, path: OURS_DEFAULT }, { case: FIRST_VISIT_TIME, path: ANCHOR })
  s.ratio('browser: first visit bytes over the wire, pgwasm / PGlite (pgwasm target <= 4 MB)', { case: FIRST_VISIT_WIRE, path: OURS_DEFAULT }, { case: FIRST_VISIT_WIRE, path: ANCHOR })
  s.notes.push(
    'First-visit rows: a page that creates an in-memory database and answers one query, each sample in a new browser context (cold HTTP cache) under Chromium\'s network emulation (CDP Network.emulateNetworkConditions: 10 Mbit/s down and up, 40 ms latency). The server gzips each file at level 9 when that makes it smaller, as a server set up for an app would; the byte rows count every file of the visit (page, scripts, engine assets), as sent and uncompressed. pgwasm\'s default build fetches its engine from assets/ beside the script (the app copies dist/browser/assets/ there); the single-file build carries it in the script; PGlite is served as its own dist/ ES modules, which fetch pglite.wasm and pglite.data.',
  )
}

/** The file behind `path`: a built page (`/<variant>/...`), pgwasm's assets beside the default page, or PGlite's dist. */
function fileFor(path: string, out: string, ourAssets: string, pgliteDist: string): string | undefined {
  const [, variant, ...rest] = path.split('/')
  const name = rest.join('/')
  const inside = (root: string, rel: string) => {
    const file = normalize(join(root, rel))
    return file.startsWith(root + sep) && existsSync(file) ? file : undefined
  }
  if (variant === 'pglite') return inside(pgliteDist, name)
  if (variant !== 'default' && variant !== 'single-file' && variant !== 'anchor') return undefined
  if (name === '') return join(out, variant)
  if (variant === 'default' && name.startsWith('assets/')) return inside(ourAssets, name.slice('assets/'.length))
  return readdirSync(join(out, variant)).includes(name) ? join(out, variant, name) : undefined
}
