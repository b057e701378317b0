import { createHash } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { build, type Plugin } from 'esbuild'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from './browser/app.js'
import { assetFiles, callPageApi, closeChromium, serveToChromium } from '@pgwasm/test-support/chromium'

/**
 * What a first visit of a plain app downloads (#34): two apps on the core,
 * one with the package on the page (memory, idb://), one with it in a
 * worker (memory, idb://, opfs-ahp://), bundled with plain esbuild options
 * and served on 127.0.0.1 beside the package's `dist/browser/assets/`, as
 * its README says; the server records every file it sends. The default
 * build fetches the engine as assets; the single-file build
 * (`@pgwasm/pglite/embedded`) needs nothing beside the script.
 */

const here = dirname(fileURLToPath(import.meta.url))
const pkgDir = join(here, '..')
/** The budget of a first visit, JavaScript and engine assets, each gzipped as a server sends it (gzip -9). */
const FIRST_VISIT_BUDGET = 4_000_000

let out: string
let server: Server
let origin: string
let browser: Browser
/** Per path: the bytes sent, in order of request. */
let sent: [path: string, bytes: Buffer][] = []

/** The app with `@pgwasm/pglite` resolved to its single-file entry, the rest of the build as plain. */
const singleFile: Plugin = {
  name: 'single-file',
  setup(b) {
    b.onResolve({ filter: /^@pgwasm\/pglite$/ }, (args) => b.resolve('@pgwasm/pglite/embedded', { kind: args.kind, resolveDir: args.resolveDir }))
  },
}

beforeAll(async () => {
  if (!existsSync(join(pkgDir, 'dist', 'browser', 'index.js'))) throw new Error('build the package first (pnpm test does): dist/browser/ is missing')
  out = mkdtempSync(join(tmpdir(), 'pgwasm-download-'))
  const app = (outdir: string, plugins: Plugin[]) =>
    build({
      entryPoints: ['page-app', 'worker-app', 'core-worker', 'app', 'pg-worker'].map((name) => join(here, 'browser', `${name}.ts`)),
      bundle: true,
      format: 'esm',
      platform: 'browser',
      outdir,
      logLevel: 'error',
      plugins,
    })
  await Promise.all([app(join(out, 'default'), []), app(join(out, 'embedded'), [singleFile])])
  const page = (script: string) => Buffer.from(`<!doctype html><meta charset="utf-8"><script type="module" src="${script}"></script>`)
  const assets = assetFiles(join(pkgDir, 'dist', 'browser', 'assets'))
  server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname
    const [, served, ...rest] = path.split('/')
    const file = rest.join('/')
    // `no-packs` is the default build from a server that lacks the packs fetched on use.
    const variant = served === 'no-packs' ? 'default' : served
    let body: Buffer | undefined
    let type = 'text/javascript'
    if ((variant === 'default' || variant === 'embedded') && /^[\w-]+\.js$/.test(file) && existsSync(join(out, variant, file))) body = readFileSync(join(out, variant, file))
    else if ((variant === 'default' || variant === 'embedded') && ['page-app', 'worker-app', 'app'].includes(file)) {
      body = page(`${file}.js`)
      type = 'text/html'
    } else if (variant === 'default' && assets[`/${file}`] && !(served === 'no-packs' && file.startsWith('assets/share/'))) [type, body] = assets[`/${file}`]!
    // app.ts starts its worker from the root (`/pg-worker.js`), which then finds the assets at `/assets/`.
    else if (path === '/pg-worker.js' && existsSync(join(out, 'default', 'pg-worker.js'))) body = readFileSync(join(out, 'default', 'pg-worker.js'))
    else if (assets[path]) [type, body] = assets[path]!
    if (body === undefined) {
      res.writeHead(404).end()
      return
    }
    // Cacheable as a static server makes them (a validator and a lifetime): the
    // page's engine and the worker's then share one download of each asset.
    const etag = `"${createHash('sha1').update(body).digest('hex')}"`
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, { etag }).end()
      return
    }
    sent.push([path, body])
    res.writeHead(200, { 'content-type': type, 'content-length': body.length, etag, 'cache-control': 'max-age=3600' }).end(body)
  })
  ;({ origin, browser } = await serveToChromium(server))
}, 180_000)

afterAll(async () => {
  await closeChromium(browser, server)
  if (out) rmSync(out, { recursive: true, force: true })
})

/** A first visit of `app` of the build `variant` in a new browser context (no HTTP cache, no storage): what it answered and what it downloaded. */
async function firstVisit(variant: 'default' | 'embedded', app: 'page-app' | 'worker-app'): Promise<{ answers: number[]; paths: string[]; raw: number; gzipped: number }> {
  const context = await browser.newContext()
  sent = []
  try {
    const page = await context.newPage()
    await page.goto(`${origin}/${variant}/${app}`)
    const answers = await page.evaluate(() => (globalThis as unknown as { firstAnswers: Promise<number[]> }).firstAnswers)
    const files = sent
    return {
      answers,
      paths: files.map(([path]) => path),
      raw: files.reduce((n, [, body]) => n + body.length, 0),
      gzipped: files.reduce((n, [, body]) => n + gzipSync(body, { level: 9 }).length, 0),
    }
  } finally {
    await context.close()
  }
}

describe('what a first visit of a plain app downloads', () => {
  for (const [app, answers] of [
    ['page-app', [2, 2]],
    ['worker-app', [2, 2, 2]],
  ] as const) {
    it(`the default build, ${app}: under 4 MB gzipped, JavaScript and engine assets; nothing used only later comes with it`, async () => {
      const visit = await firstVisit('default', app)
      expect(visit.answers).toEqual(answers)
      expect([...new Set(visit.paths.filter((path) => path.startsWith('/default/assets/')))].sort()).toEqual(
        ['/default/assets/pglite.data', '/default/assets/pglite.wasm', '/default/assets/template.pgwt.lzma'],
      )
      expect(visit.gzipped).toBeLessThan(FIRST_VISIT_BUDGET)
      console.log(`first visit, default build, ${app}: ${visit.raw} bytes, ${visit.gzipped} gzipped, in ${visit.paths.length} files`)
    }, 180_000)

    it(`the single-file build (@pgwasm/pglite/embedded), ${app}: runs with nothing served beside its scripts`, async () => {
      const visit = await firstVisit('embedded', app)
      expect(visit.answers).toEqual(answers)
      expect(visit.paths.every((path) => path.startsWith('/embedded/') && !path.includes('/assets/'))).toBe(true)
      console.log(`first visit, single-file build, ${app}: ${visit.raw} bytes, ${visit.gzipped} gzipped, in ${visit.paths.length} files`)
    }, 180_000)
  }

  it('a pack that cannot be fetched fails the statement that needed it with an ERROR, and the database goes on', async () => {
    const context = await browser.newContext()
    try {
      const page = await context.newPage()
      await page.goto(`${origin}/no-packs/app`)
      await page.waitForFunction(() => 'pgwasmTest' in globalThis, undefined, { timeout: 60_000 })
      const r = await callPageApi<Awaited<ReturnType<TestApi['missingPack']>>>(page, 'pgwasmTest', 'missingPack', [])
      expect(r.error).toMatchObject({ name: 'DatabaseError', code: '22023', isDatabaseError: true })
      expect(r.after).toBe(2)
    } finally {
      await context.close()
    }
  }, 180_000)

  it('fetches what Postgres reads only on use (time zones, text search, an encoding, PL/pgSQL, ICU, initdb) when it is used, on the page and in a worker', async () => {
    const context = await browser.newContext()
    try {
      const page: Page = await context.newPage()
      await page.goto(`${origin}/default/app`)
      await page.waitForFunction(() => 'pgwasmTest' in globalThis, undefined, { timeout: 60_000 })
      const call = <K extends keyof TestApi>(fn: K, ...args: Parameters<TestApi[K]>) => callPageApi<Awaited<ReturnType<TestApi[K]>>>(page, 'pgwasmTest', fn, args)
      sent = []
      const expected = { paris: '14:00 CEST', tsvector: "'brown':3 'fox':4 'quick':2", latin1: 'e9', plpgsql: 42, icu: true }
      const onPage = await call('filesOnUse', 'page')
      expect(onPage).toMatchObject(expected)
      expect(onPage.zones).toBeGreaterThan(500)
      const packs = ['timezone', 'tsearch_data', 'dict_snowball', 'utf8_and_iso8859_1', 'plpgsql', 'icu'].map((pack) => `/default/assets/share/${pack}.lzma`)
      expect(sent.map(([path]) => path).filter((path) => path.includes('/share/')).sort()).toEqual([...packs].sort())
      // A worker's engine fetches its own.
      expect(await call('filesOnUse', 'worker')).toMatchObject(expected)
      expect(await call('initdbInPage')).toEqual(['made by initdb'])
      expect(sent.map(([path]) => path)).toEqual(expect.arrayContaining(['/default/assets/initdb.wasm', '/default/assets/initdb.js']))
    } finally {
      await context.close()
    }
  }, 180_000)
})
