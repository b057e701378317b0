import type { Server } from 'node:http'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { assetFiles, callPageApi, closeChromium, fileServer, serveToChromium } from '@pgwasm/test-support/chromium'
import { tempDir } from '@pgwasm/test-support/temp-dirs'

/**
 * The PGlite app ecosystem in the browser: `@electric-sql/pglite-react`
 * (PGliteProvider, usePGlite, useLiveQuery, useLiveIncrementalQuery), as
 * published, rendering with React 19 in headless Chromium on our PGlite and
 * live extension. Its imports of `@electric-sql/pglite` are aliased to
 * `@pgwasm/pglite` in the bundle, the way an app switches.
 */

const here = dirname(fileURLToPath(import.meta.url))
const pkgDir = join(here, '..')

let out: string
let server: Server
let browser: Browser
let context: BrowserContext
let origin: string
let page: Page

beforeAll(async () => {
  if (!existsSync(join(pkgDir, 'dist', 'browser', 'index.js'))) throw new Error('build the package first (pnpm test does): dist/browser/ is missing')
  out = tempDir('pgwasm-react-')
  await build({
    entryPoints: ['react.tsx', 'repl.tsx', 'react-tabs.tsx', 'pg-worker.ts'].map((entry) => join(here, 'browser', entry)),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    jsx: 'automatic',
    // An alias resolves from the working directory: the package itself, which resolves its own name.
    absWorkingDir: pkgDir,
    alias: { '@electric-sql/pglite': '@pgwasm/pglite' },
    define: { 'process.env.NODE_ENV': '"production"' },
    loader: { '.css': 'css' },
    outdir: out,
    logLevel: 'error',
  })
  const files: Record<string, [string, Buffer | string]> = {
    '/': ['text/html', '<!doctype html><meta charset="utf-8"><div id="root"></div><script type="module" src="/react.js"></script>'],
    '/react.js': ['text/javascript', readFileSync(join(out, 'react.js'))],
    '/repl': ['text/html', '<!doctype html><meta charset="utf-8"><div id="root"></div><script type="module" src="/repl.js"></script>'],
    '/repl.js': ['text/javascript', readFileSync(join(out, 'repl.js'))],
    '/react-tabs': ['text/html', '<!doctype html><meta charset="utf-8"><div id="root"></div><script type="module" src="/react-tabs.js"></script>'],
    '/react-tabs.js': ['text/javascript', readFileSync(join(out, 'react-tabs.js'))],
    '/pg-worker.js': ['text/javascript', readFileSync(join(out, 'pg-worker.js'))],
  }
  // The engine's assets beside the scripts, as the app's server would have them.
  Object.assign(files, assetFiles(join(pkgDir, 'dist', 'browser', 'assets')))
  server = fileServer(files)
  const opened = await serveToChromium(server)
  origin = opened.origin
  context = opened.context
  browser = opened.browser
  page = await opened.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (err) => errors.push(err.message))
  await page.goto(`${opened.origin}/`)
  await page.waitForFunction(() => 'pgwasmReact' in globalThis, undefined, { timeout: 30_000 }).catch((err: unknown) => {
    throw new Error(`the React page did not load: ${errors.join('; ') || String(err)}`)
  })
}, 120_000)

afterAll(async () => {
  await closeChromium(browser, server)
})

const exec = (sql: string): Promise<void> => callPageApi(page, 'pgwasmReact', 'exec', [sql])
const items = (list: string): Promise<string[]> => page.locator(`#${list} li`).allTextContents()

/** Waits until `read` gives `expected` (the hooks re-render after the live query's callback). */
async function eventually<T>(read: () => Promise<T>, expected: T): Promise<void> {
  const deadline = Date.now() + 10_000
  let last: T | undefined
  while (Date.now() < deadline) {
    last = await read()
    if (JSON.stringify(last) === JSON.stringify(expected)) return
    await new Promise((r) => setTimeout(r, 25))
  }
  expect(last).toEqual(expected)
}

describe('@electric-sql/pglite-react on @pgwasm/pglite', () => {
  it('renders live query results and re-renders on every change: plain, sql-tagged and incremental hooks', { timeout: 60_000 }, async () => {
    await eventually(() => page.locator('#count').textContent(), '0')
    await exec("insert into todo (title) values ('milk'), ('bread'), ('hidden')")
    await eventually(() => items('open'), ['milk', 'bread', 'hidden'])
    await eventually(() => items('all'), ['milk', 'bread', 'hidden'])
    await eventually(() => page.locator('#count').textContent(), '2')
    await exec("update todo set done = true where title = 'milk'; update todo set title = 'rye bread' where title = 'bread'")
    await eventually(() => items('open'), ['rye bread', 'hidden'])
    await eventually(() => items('all'), ['milk', 'rye bread', 'hidden'])
    await exec("delete from todo where title = 'hidden'")
    await eventually(() => items('all'), ['milk', 'rye bread'])
    // usePGlite() hands the component the provider's instance.
    await page.click('#add')
    await eventually(() => items('all'), ['milk', 'rye bread', 'clicked'])
    await eventually(() => page.locator('#count').textContent(), '3')
  })
})

describe('@electric-sql/pglite-react on a PGliteWorker shared by two tabs', () => {
  it('re-renders each tab on the other tab\'s writes, through the leader and from it', { timeout: 90_000 }, async () => {
    const db = `react-tabs-${Date.now()}`
    const open = async (): Promise<Page> => {
      const tab = await context.newPage()
      const errors: string[] = []
      tab.on('pageerror', (err) => errors.push(err.message))
      await tab.goto(`${origin}/react-tabs?db=${db}`)
      await tab.waitForFunction(() => 'pgwasmReactTabs' in globalThis, undefined, { timeout: 30_000 }).catch((err: unknown) => {
        throw new Error(`the React tabs page did not load: ${errors.join('; ') || String(err)}`)
      })
      return tab
    }
    const leader = await open()
    const follower = await open()
    expect(await callPageApi(leader, 'pgwasmReactTabs', 'isLeader', [])).toBe(true)
    expect(await callPageApi(follower, 'pgwasmReactTabs', 'isLeader', [])).toBe(false)
    const list = (tab: Page) => (): Promise<string[]> => tab.locator('#all li').allTextContents()
    for (const tab of [leader, follower]) await eventually(() => tab.locator('#count').textContent(), '0')
    // A follower's write re-renders the leading tab, and the other way round.
    await callPageApi(follower, 'pgwasmReactTabs', 'exec', ["insert into todo (title) values ('from the follower')"])
    await eventually(list(leader), ['from the follower'])
    await callPageApi(leader, 'pgwasmReactTabs', 'exec', ["insert into todo (title) values ('from the leader')"])
    await eventually(list(follower), ['from the follower', 'from the leader'])
    // A click in one tab (usePGlite's instance) shows in the other.
    await follower.click('#add')
    await eventually(list(leader), ['from the follower', 'from the leader', 'clicked'])
    await eventually(() => leader.locator('#count').textContent(), '3')
    await leader.close()
    await follower.close()
  })
})

describe('@electric-sql/pglite-repl on @pgwasm/pglite', () => {
  it('runs what is typed into its editor and shows the result table, an error as an error, and psql\'s \\d', { timeout: 60_000 }, async () => {
    const repl = await context.newPage()
    const errors: string[] = []
    repl.on('pageerror', (err) => errors.push(err.message))
    await repl.goto(`${origin}/repl`)
    await repl.waitForFunction(() => 'pgwasmRepl' in globalThis, undefined, { timeout: 30_000 }).catch((err: unknown) => {
      throw new Error(`the REPL page did not load: ${errors.join('; ') || String(err)}`)
    })
    const editor = repl.locator('.cm-content')
    await editor.click()
    await repl.keyboard.type('select name from planet order by id;')
    await repl.keyboard.press('Enter')
    await eventually(() => repl.locator('.PGliteRepl-table').first().textContent(), 'nameMercuryVenus')
    await editor.click()
    await repl.keyboard.type('select * from no_such_table;')
    await repl.keyboard.press('Enter')
    await eventually(async () => /no_such_table/.test((await repl.locator('.PGliteRepl-error').first().textContent()) ?? ''), true)
    // psql's describe commands run on ours too (psql-describe's catalog queries;
    // the REPL shows the title, and the table of its last query, on PGlite alike).
    await editor.click()
    await repl.keyboard.type('\\d planet')
    await repl.keyboard.press('Enter')
    const described = async (): Promise<boolean> => /\\d planetTable "public\.planet"/.test((await repl.locator('.PGliteRepl-output').textContent()) ?? '')
    await eventually(described, true).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; the output read: ${await repl.locator('.PGliteRepl-output').textContent()}`)
    })
    expect(errors).toEqual([])
    await repl.close()
  })
})
