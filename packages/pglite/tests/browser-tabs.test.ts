import type { Server } from 'node:http'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { assetFiles, callPageApi, closeChromium, fileServer, serveToChromium } from '@pgwasm/test-support/chromium'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import type { TabsApi } from './browser/tabs.js'

/**
 * Several tabs of one origin on one `idb://` database, in real headless
 * Chromium: each tab runs its own worker (tests/browser/pg-worker.ts, what
 * the README tells users to write); one leads, the others forward.
 */

const here = dirname(fileURLToPath(import.meta.url))
const pkgDir = join(here, '..')

let out: string
let server: Server
let origin: string
let browser: Browser
let context: BrowserContext

function call<K extends keyof TabsApi>(page: Page, fn: K, ...args: Parameters<TabsApi[K]>): Promise<Awaited<ReturnType<TabsApi[K]>>> {
  return callPageApi(page, 'pgwasmTabs', fn, args)
}

/** A new tab with the database `name` open in its worker; whether it leads. */
async function openTab(name: string): Promise<{ page: Page; leads: boolean }> {
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (err) => errors.push(err.message))
  await page.goto(`${origin}/`)
  await page.waitForFunction(() => 'pgwasmTabs' in globalThis, undefined, { timeout: 20_000 }).catch((err: unknown) => {
    throw new Error(`the tab page did not load: ${errors.join('; ') || String(err)}`)
  })
  return { page, leads: await call(page, 'open', name) }
}

/** Waits until the live query `key` of every page in `pages` shows `expected`. */
async function allShow(pages: readonly Page[], key: string, expected: unknown[], what: string): Promise<void> {
  await within(
    (async () => {
      for (;;) {
        const shown = await Promise.all(pages.map((page) => call(page, 'shown', key)))
        if (shown.every((rows) => JSON.stringify(rows) === JSON.stringify(expected))) return
        await new Promise((r) => setTimeout(r, 20))
      }
    })(),
    10_000,
    what,
  )
}

beforeAll(async () => {
  if (!existsSync(join(pkgDir, 'dist', 'browser', 'index.js'))) throw new Error('build the package first (pnpm test does): dist/browser/ is missing')
  out = tempDir('pgwasm-tabs-')
  await build({
    entryPoints: [join(here, 'browser', 'tabs.ts'), join(here, 'browser', 'pg-worker.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    outdir: out,
    logLevel: 'error',
  })
  const files: Record<string, [string, Buffer | string]> = {
    '/': ['text/html', '<!doctype html><meta charset="utf-8"><script type="module" src="/tabs.js"></script>'],
    '/tabs.js': ['text/javascript', readFileSync(join(out, 'tabs.js'))],
    '/pg-worker.js': ['text/javascript', readFileSync(join(out, 'pg-worker.js'))],
  }
  // The engine's assets beside the scripts, as the app's server would have them.
  Object.assign(files, assetFiles(join(pkgDir, 'dist', 'browser', 'assets')))
  server = fileServer(files)
  ;({ origin, browser, context } = await serveToChromium(server))
}, 120_000)

afterAll(async () => {
  await closeChromium(browser, server)
})

describe('several tabs on one idb:// database', () => {
  it('lets three tabs write and read one database: one leads, the others forward, transactions and notifications included', { timeout: 120_000 }, async () => {
    const name = `three-${Date.now()}`
    const tabs = [await openTab(name), await openTab(name), await openTab(name)]
    expect(tabs.map((t) => t.leads)).toEqual([true, false, false])
    const [a, b, c] = tabs.map((t) => t.page) as [Page, Page, Page]
    // A follower makes the table; every tab writes; every tab reads all rows.
    await call(b, 'exec', 'create table shared_rows (v int primary key)')
    for (const [i, page] of [a, b, c].entries()) await call(page, 'query', 'insert into shared_rows values ($1)', [i + 1])
    for (const page of [a, b, c]) expect(await call(page, 'query', 'select v from shared_rows order by v')).toEqual([{ v: 1 }, { v: 2 }, { v: 3 }])
    // A follower's transaction commits or rolls back on the leader's database.
    expect(await call(c, 'transaction', 10, true)).toBe('committed')
    expect(await call(c, 'transaction', 11, false)).toBe('roll back')
    expect(await call(a, 'query', 'select v from shared_rows where v >= 10')).toEqual([{ v: 10 }])
    // A NOTIFY from any tab reaches a listener in any tab.
    await call(c, 'listen', 'news')
    await call(a, 'listen', 'news')
    await call(b, 'exec', "notify news, 'from b'")
    await within(
      (async () => {
        while ((await call(c, 'heard')).length === 0 || (await call(a, 'heard')).length === 0) await new Promise((r) => setTimeout(r, 20))
      })(),
      10_000,
      'the notification',
    )
    expect(await call(c, 'heard')).toEqual(['from b'])
    expect(await call(a, 'heard')).toEqual(['from b'])
    // A live query in every tab follows every tab's writes.
    for (const page of [a, b, c]) await call(page, 'liveQuery', 'big', 'select v from shared_rows where v >= 10 order by v')
    await allShow([a, b, c], 'big', [{ v: 10 }], 'the live queries\' first results')
    await call(c, 'query', 'insert into shared_rows values ($1)', [20])
    await allShow([a, b, c], 'big', [{ v: 10 }, { v: 20 }], 'a follower\'s insert in every tab')
    await call(a, 'exec', 'update shared_rows set v = 30 where v = 20')
    await allShow([a, b, c], 'big', [{ v: 10 }, { v: 30 }], 'the leader\'s update in every tab')
    expect(await call(c, 'transaction', 40, true)).toBe('committed')
    await allShow([a, b, c], 'big', [{ v: 10 }, { v: 30 }, { v: 40 }], 'a follower\'s transaction in every tab')
    // Nobody took over: no tab heard of a leader change.
    for (const page of [a, b, c]) expect(await call(page, 'leaderChanges')).toBe(0)
    // Each tab's live query has a trigger of its own; a tab closed without
    // close() has its trigger dropped by the leader once the tab is gone.
    const liveTriggers = async (): Promise<number> =>
      ((await call(a, 'query', "select count(*)::int as n from pg_trigger where tgname like 'pgwasm\\_live\\_notify\\_%'")) as [{ n: number }])[0].n
    expect(await liveTriggers()).toBe(3)
    await c.close()
    await within(
      (async () => {
        while ((await liveTriggers()) !== 2) await new Promise((r) => setTimeout(r, 20))
      })(),
      10_000,
      'the closed tab\'s trigger to go',
    )
    await call(b, 'query', 'insert into shared_rows values ($1)', [50])
    await allShow([a, b], 'big', [{ v: 10 }, { v: 30 }, { v: 40 }, { v: 50 }], 'the remaining tabs after one closed')
    for (const page of [a, b]) await page.close()
  })

  it('moves the database to another tab when the leading tab closes mid-stream: every acknowledged write is there, nothing hangs', { timeout: 120_000 }, async () => {
    const name = `failover-${Date.now()}`
    const leader = await openTab(name)
    const follower = await openTab(name)
    const third = await openTab(name)
    expect([leader.leads, follower.leads, third.leads]).toEqual([true, false, false])
    await call(follower.page, 'exec', 'create table shared_rows (v int primary key)')
    for (const tab of [leader, follower, third]) await call(tab.page, 'liveQuery', 'count', 'select count(*)::int as n from shared_rows')
    await call(third.page, 'listen', 'after')
    await call(follower.page, 'startInserts', 1, 300)
    // Let some inserts through, then close the leading tab under them.
    await within(
      (async () => {
        for (;;) {
          const [{ n }] = (await call(third.page, 'query', 'select count(*)::int as n from shared_rows')) as [{ n: number }]
          if (n >= 20) return
          await new Promise((r) => setTimeout(r, 10))
        }
      })(),
      20_000,
      'the first inserts',
    )
    await leader.page.close()
    const { acked, errors } = await within(call(follower.page, 'finishInserts'), 60_000, 'the inserts around the failover')
    // Calls on their way to the closed tab fail with the retryable code; no other failure.
    expect(new Set(errors)).toEqual(errors.length > 0 ? new Set(['LEADER_CHANGED']) : new Set())
    expect(acked.length + errors.length).toBe(300)
    expect(acked.length).toBeGreaterThan(250)
    // Exactly one of the remaining tabs leads now, and it heard of it.
    const leads = [await call(follower.page, 'isLeader'), await call(third.page, 'isLeader')]
    expect(leads.filter(Boolean)).toHaveLength(1)
    const newLeader = leads[0] ? follower.page : third.page
    expect(await call(newLeader, 'leaderChanges')).toBe(1)
    // onLeaderChange fires in every tab when leadership moves, as PGlite's does; the tab that led first heard nothing at its start.
    expect(await call(newLeader === follower.page ? third.page : follower.page, 'leaderChanges')).toBe(1)
    const rows = (await call(third.page, 'query', 'select v from shared_rows order by v')) as { v: number }[]
    const stored = new Set(rows.map((r) => r.v))
    for (const v of acked) expect(stored.has(v), `acknowledged insert ${v}`).toBe(true)
    // The remaining tabs' live queries and listens carry on in the new leader's session.
    await allShow([follower.page, third.page], 'count', [{ n: rows.length }], 'the live counts after the failover')
    // The dead session's temporary triggers may linger until the new session's
    // first temporary object clears them: make one, so only new triggers count.
    await call(third.page, 'exec', 'create temp table after_failover (x int)')
    await call(newLeader === follower.page ? third.page : follower.page, 'query', 'insert into shared_rows values ($1)', [1000])
    await allShow([follower.page, third.page], 'count', [{ n: rows.length + 1 }], 'a live count after a write in the new session')
    await call(follower.page, 'exec', "notify after, 'new session'")
    await within(
      (async () => {
        while (!(await call(third.page, 'heard')).includes('new session')) await new Promise((r) => setTimeout(r, 20))
      })(),
      10_000,
      'a notification in the new session',
    )
    await follower.page.close()
    await third.page.close()
  })

  it('survives 20 leader changes in a row with no call left hanging', { timeout: 240_000 }, async () => {
    const name = `changes-${Date.now()}`
    let current = await openTab(name)
    expect(current.leads).toBe(true)
    await call(current.page, 'exec', 'create table shared_rows (v int primary key)')
    let next = await openTab(name)
    for (let change = 1; change <= 20; change++) {
      await within(call(next.page, 'query', 'insert into shared_rows values ($1)', [change]), 30_000, `insert ${change} from a follower`)
      await current.page.close()
      // The follower leads now; its next call is served by its own worker.
      await within(
        (async () => {
          while (!(await call(next.page, 'isLeader'))) await new Promise((r) => setTimeout(r, 10))
        })(),
        30_000,
        `leader change ${change}`,
      )
      current = next
      next = await openTab(name)
      expect(next.leads).toBe(false)
    }
    const [{ n }] = (await within(call(next.page, 'query', 'select count(*)::int as n from shared_rows'), 30_000, 'the final count')) as [{ n: number }]
    expect(n).toBe(20)
    await current.page.close()
    await next.page.close()
  })
})
