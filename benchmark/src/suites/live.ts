import type { Loaded } from '../anchors.js'
import { errorText, timeInterleaved, type SuiteRun, type TimedPath } from '../harness.js'

/**
 * Live queries: how long after a committed write its live queries' callbacks
 * run with the new result, for our live extension and PGlite's, each on its
 * own in-memory database in this process, taking turns per round.
 */

export const OURS = 'pgwasm live'
export const ANCHOR = 'PGlite live'
export const LIVE_PATHS = [OURS, ANCHOR]
export const WRITE_TO_CALLBACK = 'write to callback, 1 live query'
export const FANOUT_10 = 'write to all callbacks, 10 live queries'
export const FANOUT_100 = 'write to all callbacks, 100 live queries'
export const LIVE_CASES = [WRITE_TO_CALLBACK, FANOUT_10, FANOUT_100]

const TABLE_ROWS = 100
/** Rows every live query reads; each write updates one of them, so every result changes. */
const WATCHED_ROWS = 10
const DDL = `create table live_items (id int primary key, name text not null, qty int not null);
insert into live_items select g, 'item ' || g, g from generate_series(1, ${TABLE_ROWS}) g`
// $1 differs per live query, so N of them are N distinct queries for both engines, not one shared.
const LIVE_SQL = `select id, name, qty, $1::int as watcher from live_items where id <= ${WATCHED_ROWS} order by id`
const WRITE_SQL = 'update live_items set qty = $1 where id = $2'
/** Far above the slowest fan-out seen (about a second at 100 queries); only a lost notification takes this long. */
const CALLBACK_TIMEOUT_MS = 30_000

interface LiveRow {
  id: number
  qty: number
}

/** What the suite uses of a database with the live extension; both packages satisfy it. */
interface LiveDb {
  query(sql: string, params?: unknown[]): Promise<unknown>
  exec(sql: string): Promise<unknown>
  live: {
    query(sql: string, params: unknown[], callback: (results: { rows: LiveRow[] }) => void): Promise<{ unsubscribe(): Promise<void> }>
  }
  close(): Promise<void>
}

interface LiveImpl {
  path: string
  create(): Promise<LiveDb>
}

async function loadImpl(path: string, core: string, extension: string): Promise<Loaded<LiveImpl>> {
  try {
    type Ctor = { create(options: { extensions: Record<string, unknown> }): Promise<LiveDb> }
    const { PGlite } = (await import(core)) as { PGlite: Ctor }
    const { live } = (await import(extension)) as { live: unknown }
    return { ok: true, value: { path, create: () => PGlite.create({ extensions: { live } }) } }
  } catch (err) {
    return { ok: false, reason: `${core} with ${extension} did not load: ${errorText(err)}` }
  }
}

/**
 * Counts the live queries that have seen the latest write. A callback
 * counts once per write, and only with a result holding that write's value:
 * a late refresh of an earlier write is not mistaken for this one.
 */
class WriteProbe {
  readonly #lastSeen: Int32Array
  #id = 0
  #value = -1
  #pending = 0
  #done: (() => void) | undefined

  constructor(watchers: number) {
    this.#lastSeen = new Int32Array(watchers).fill(-1)
  }

  callbackOf(watcher: number): (results: { rows: LiveRow[] }) => void {
    return (results) => {
      if (this.#pending === 0 || this.#lastSeen[watcher] === this.#value) return
      const row = results.rows[this.#id - 1]
      if (row?.id !== this.#id || row.qty !== this.#value) return
      this.#lastSeen[watcher] = this.#value
      if (--this.#pending === 0) this.#done?.()
    }
  }

  /**
   * Resolves once every live query's callback got a result with `value` in
   * row `id`; rejects after CALLBACK_TIMEOUT_MS, so a lost notification
   * fails the row instead of hanging the suite.
   */
  expect(id: number, value: number): Promise<void> {
    this.#id = id
    this.#value = value
    this.#pending = this.#lastSeen.length
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const missing = this.#pending
        this.#pending = 0
        reject(new Error(`${missing} of ${this.#lastSeen.length} live callbacks never saw the write within ${CALLBACK_TIMEOUT_MS / 1000} s`))
      }, CALLBACK_TIMEOUT_MS)
      this.#done = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }
}

interface Prepared {
  db: LiveDb
  /** Times one write until every callback saw it; counts its own writes so each value is new. */
  fn: () => Promise<unknown>
}

async function prepare(impl: LiveImpl, watchers: number): Promise<Prepared> {
  const db = await impl.create()
  try {
    await db.exec(DDL)
    const probe = new WriteProbe(watchers)
    for (let k = 0; k < watchers; k++) await db.live.query(LIVE_SQL, [k], probe.callbackOf(k))
    // Values above every seeded qty, so a write is always a change.
    let value = TABLE_ROWS
    return {
      db,
      fn: async () => {
        value++
        const id = (value % WATCHED_ROWS) + 1
        const seen = probe.expect(id, value)
        await db.query(WRITE_SQL, [value, id])
        await seen
      },
    }
  } catch (err) {
    await db.close().catch(() => {})
    throw err
  }
}

export async function run(s: SuiteRun): Promise<void> {
  const cfg = s.config
  const scaled = (n: number) => cfg.iterations ?? Math.max(5, Math.round(n * cfg.scale))
  const cases = [
    { name: WRITE_TO_CALLBACK, watchers: 1, iterations: scaled(1000) },
    { name: FANOUT_10, watchers: 10, iterations: scaled(300) },
    { name: FANOUT_100, watchers: 100, iterations: scaled(100) },
  ].filter((c) => s.wants(c.name))
  const warmup = cfg.warmup ?? Math.max(2, Math.round(20 * cfg.scale))
  const rounds = 5
  Object.assign(s.settings, { iterations: Object.fromEntries(cases.map((c) => [c.name, c.iterations])), warmup, rounds, tableRows: TABLE_ROWS, rowsPerLiveQuery: WATCHED_ROWS })
  s.notes.push(
    `Each case gets a fresh in-memory database per path: a ${TABLE_ROWS}-row table and 1, 10 or 100 live queries (db.live.query) of ${WATCHED_ROWS} rows each, distinct by a parameter.`,
    'A sample is one UPDATE of a watched row through db.query(), timed until the write resolved and every callback had a result holding the new value.',
  )
  if (cases.length === 0) return

  // In LIVE_PATHS order: ours first.
  const impls = [await loadImpl(OURS, '@pgwasm/pglite', '@pgwasm/pglite/live'), await loadImpl(ANCHOR, '@electric-sql/pglite', '@electric-sql/pglite/live')]
  for (const c of cases) {
    const prepared = new Map<string, Prepared>()
    const results = new Map<string, number[] | Error>()
    try {
      const paths: TimedPath[] = []
      for (const impl of impls) {
        if (!impl.ok) continue
        try {
          const t0 = performance.now()
          const p = await prepare(impl.value, c.watchers)
          s.progress(`${c.name} | ${impl.value.path}: set up in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
          prepared.set(impl.value.path, p)
          paths.push({ path: impl.value.path, fn: p.fn })
        } catch (err) {
          results.set(impl.value.path, err instanceof Error ? err : new Error(String(err)))
        }
      }
      for (const [path, res] of await timeInterleaved(paths, { iterations: c.iterations, warmup, rounds })) results.set(path, res)
    } finally {
      for (const p of prepared.values()) await p.db.close().catch(() => {})
    }
    for (const [k, path] of LIVE_PATHS.entries()) {
      const impl = impls[k]!
      const base = { case: c.name, path, side: k === 0 ? ('ours' as const) : ('anchor' as const), unit: 'ms' as const, ...(k === 0 ? {} : { vs: OURS }) }
      const res = results.get(path)
      if (!impl.ok) s.mark({ ...base, status: k === 0 ? 'not built' : 'skipped', reason: impl.reason })
      else if (res instanceof Error) s.mark({ ...base, status: 'failed', reason: errorText(res) })
      else s.add({ ...base, samples: res ?? [] })
    }
  }

  s.ratio('write to callback: pgwasm live / PGlite live (target <= 0.5)', { case: WRITE_TO_CALLBACK, path: OURS }, { case: WRITE_TO_CALLBACK, path: ANCHOR })
  s.ratio('100 live queries: pgwasm live / PGlite live', { case: FANOUT_100, path: OURS }, { case: FANOUT_100, path: ANCHOR })
}
