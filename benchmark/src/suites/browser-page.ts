// The page the browser suite times, bundled twice: against our
// `@pgwasm/pglite` (browser build) and against `@electric-sql/pglite`
// (served as its own ES modules, as its docs use it). Same code, so the
// numbers compare the libraries only.
import { PGlite } from '@pgwasm/pglite'
import { PGliteWorker } from '@pgwasm/pglite/worker'

type Db = { query(sql: string, params?: unknown[]): Promise<unknown>; exec(sql: string): Promise<unknown>; close(): Promise<void> }
type Ctor = { create(dataDir?: string, options?: Record<string, unknown>): Promise<Db> }
const Lib = PGlite as unknown as Ctor

const open = new Map<string, Db>()
/** This tab's PGliteWorker for the tab rows, and its failover probe. */
const tab: { pg?: Db; probing: boolean; longestGap: number; markAt: number; sinceMark: number } = { probing: false, longestGap: 0, markAt: Infinity, sinceMark: 0 }
/** Unmeasured blocks per side before the worker rows are timed. */
const WARM_BLOCKS = 100
const WARM_MS = 4000
/** Ops per timed block of the worker rows. */
const BLOCK_OPS = 20

/** Per-op ms of `n` inserts, each followed by a select by pk of the row (ids from `from`). */
async function insertSelectOps(db: Db, from: number, n: number): Promise<number[]> {
  const out: number[] = []
  for (let i = from; i < from + n; i++) {
    const t0 = performance.now()
    await db.query('insert into kv values ($1, $2)', [i, `value ${i}`])
    await db.query('select v from kv where id = $1', [i])
    out.push(performance.now() - t0)
  }
  return out
}

const api = {
  /** ms for one in-memory create(). */
  async createMemory(): Promise<number> {
    const t0 = performance.now()
    const db = await Lib.create()
    const ms = performance.now() - t0
    await db.query('select 1')
    await db.close()
    return ms
  },
  /** ms to open (or create) an idb:// database; it stays open for the calls below. */
  async openIdb(name: string, relaxed: boolean): Promise<number> {
    const t0 = performance.now()
    const db = await Lib.create(`idb://${name}`, relaxed ? { relaxedDurability: true } : {})
    const ms = performance.now() - t0
    open.set(name, db)
    await db.exec('create table if not exists kv (id int primary key, v text not null)')
    return ms
  },
  /** Per-op ms of insert + select by pk, each insert a committed write. */
  insertSelect: (name: string, from: number, n: number): Promise<number[]> => insertSelectOps(open.get(name)!, from, n),
  async count(name: string): Promise<number> {
    const r = (await open.get(name)!.query('select count(*)::int as n from kv')) as { rows: { n: number }[] }
    return r.rows[0]!.n
  },
  /**
   * Per-op ms of insert + select by pk on the main thread and through a
   * module worker, alternating in blocks. Each sample times a block of
   * BLOCK_OPS ops and divides: without cross-origin isolation Chromium's
   * timer ticks in 0.1 ms steps, the size of one op, so single-op samples
   * were quantized to 0.1 / 0.2 / 0.5 ms.
   */
  async workerVsDirect(workerUrl: string, n: number): Promise<{ direct: number[]; worker: number[] }> {
    type WorkerCtor = { create(worker: Worker): Promise<Db> }
    const direct = await Lib.create()
    const pg = await (PGliteWorker as unknown as WorkerCtor).create(new Worker(workerUrl, { type: 'module' }))
    const out = { direct: [] as number[], worker: [] as number[] }
    for (const db of [direct, pg]) await db.exec('create table kv (id int primary key, v text not null)')
    let id = 0
    const block = async (db: Db): Promise<number> => {
      const t0 = performance.now()
      for (let i = 0; i < BLOCK_OPS; i++) {
        await db.query('insert into kv values ($1, $2)', [++id, 'x'])
        await db.query('select v from kv where id = $1', [id])
      }
      return (performance.now() - t0) / BLOCK_OPS
    }
    // Unmeasured blocks first, alternating: the page's thread has run the
    // engine's JS before (earlier rows), a new worker has not, and V8 takes
    // ~1,500 ops to optimize the query path (measured inside a worker: 0.38
    // ms per op at first, 0.12 after). One block used to compare a warm page
    // with a cold worker.
    // Capped in time: PGlite's worker takes ~11 ms per op.
    const warmUntil = performance.now() + WARM_MS
    for (let i = 0; i < WARM_BLOCKS && performance.now() < warmUntil; i++) for (const db of [direct, pg]) await block(db)
    for (let round = 0; round < Math.max(1, Math.round(n / BLOCK_OPS)); round++) {
      for (const [side, db] of [['direct', direct], ['worker', pg]] as const) out[side].push(await block(db))
    }
    await direct.close()
    await pg.close()
    return out
  },
  /**
   * A durable `dataDir` (`opfs-ahp://` or `idb://`) through a new module
   * worker: per-op ms of insert + select by pk after as many unmeasured ops,
   * then the ms a new worker takes to open it again and answer a query.
   */
  async workerStore(workerUrl: string, dataDir: string, n: number): Promise<{ ops: number[]; reopenMs: number }> {
    type WorkerCtor = { create(worker: Worker, options: object): Promise<Db> }
    const make = () => (PGliteWorker as unknown as WorkerCtor).create(new Worker(workerUrl, { type: 'module' }), { dataDir })
    const pg = await make()
    await pg.exec('create table if not exists kv (id int primary key, v text not null)')
    await insertSelectOps(pg, 1_000_000, n)
    const ops = await insertSelectOps(pg, 0, n)
    await pg.close()
    const t0 = performance.now()
    const again = await make()
    await again.query('select count(*) from kv')
    const reopenMs = performance.now() - t0
    await again.close()
    return { ops, reopenMs }
  },
  /** Opens `idb://<name>` through this tab's own worker, as every tab of an app does; whether this tab leads. */
  async tabOpen(workerUrl: string, name: string): Promise<boolean> {
    type TabWorker = Db & { isLeader: boolean }
    const pg = await (PGliteWorker as unknown as { create(worker: Worker, options: object): Promise<TabWorker> }).create(new Worker(workerUrl, { type: 'module' }), {
      dataDir: `idb://${name}`,
    })
    tab.pg = pg
    await pg.exec('create table if not exists kv (id int primary key, v text not null)')
    return pg.isLeader
  },
  tabIsLeader: (): boolean => (tab.pg as unknown as { isLeader: boolean }).isLeader,
  /** Per-op ms of insert + select by pk through this tab's worker (ids from `from`). */
  tabInsertSelect: (from: number, n: number): Promise<number[]> => insertSelectOps(tab.pg!, from, n),
  /** Starts calling `select 1` one call after another, noting the longest time between two answered calls. */
  tabStartProbe(): void {
    tab.probing = true
    tab.longestGap = 0
    tab.sinceMark = 0
    tab.markAt = Infinity
    void (async () => {
      let last = performance.now()
      while (tab.probing) {
        try {
          await tab.pg!.query('select 1')
          const now = performance.now()
          tab.longestGap = Math.max(tab.longestGap, now - last)
          if (now > tab.markAt) tab.sinceMark++
          last = now
        } catch {
          // A call that went to a leader that left: the gap goes on.
        }
      }
    })()
  },
  /** Notes now (the other tab just closed): {@link tabAnswersSinceMark} counts the answers after it. */
  tabMark(): void {
    tab.markAt = performance.now()
  },
  tabAnswersSinceMark: (): number => tab.sinceMark,
  /** Stops the probe; the longest gap between answered calls, in ms. */
  tabStopProbe(): number {
    tab.probing = false
    return tab.longestGap
  },
  async close(name: string): Promise<void> {
    await open.get(name)?.close()
    open.delete(name)
  },
}

Object.assign(globalThis, { benchApi: api })
export type BrowserBenchApi = typeof api
