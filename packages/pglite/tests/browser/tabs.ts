// The page of tests/browser-tabs.test.ts: one tab's PGliteWorker on a
// database several tabs share, driven through `window.pgwasmTabs`.
import { live } from '@pgwasm/pglite/live'
import { PGliteWorker } from '@pgwasm/pglite/worker'

type Tab = Awaited<ReturnType<typeof openWorker>>

const openWorker = (name: string) =>
  PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir: `idb://${name}`, extensions: { live } })

let pg: Tab | undefined
let leaderChanges = 0
const heard: string[] = []
let inserting: Promise<{ acked: number[]; errors: string[] }> | undefined
/** What this tab's live queries last showed, by name. */
const shown = new Map<string, unknown[]>()

function db(): Tab {
  if (!pg) throw new Error('open() first')
  return pg
}

const api = {
  async open(name: string): Promise<boolean> {
    pg = await openWorker(name)
    pg.onLeaderChange(() => leaderChanges++)
    return pg.isLeader
  },
  isLeader: (): boolean => db().isLeader,
  leaderChanges: (): number => leaderChanges,
  async query(sql: string, params?: unknown[]): Promise<unknown[]> {
    return (await db().query(sql, params)).rows
  },
  async exec(sql: string): Promise<void> {
    await db().exec(sql)
  },
  /** A transaction that inserts `value` and commits, or rolls back when `commit` is false. */
  async transaction(value: number, commit: boolean): Promise<string> {
    try {
      await db().transaction(async (tx) => {
        await tx.query('insert into shared_rows values ($1)', [value])
        if (!commit) throw new Error('roll back')
      })
      return 'committed'
    } catch (err) {
      return (err as Error).message
    }
  },
  async listen(channel: string): Promise<void> {
    await db().listen(channel, (payload) => heard.push(payload))
  },
  heard: (): string[] => heard,
  /** Starts a live query; {@link shown} reads what it shows now. */
  async liveQuery(key: string, sql: string): Promise<void> {
    const { initialResults } = await db().live.query(sql, [], (results) => shown.set(key, results.rows))
    if (!shown.has(key)) shown.set(key, initialResults.rows)
  },
  shown: (key: string): unknown[] | undefined => shown.get(key),
  /** Starts `count` inserts one after another; {@link finishInserts} reports which were acknowledged. */
  startInserts(from: number, count: number): void {
    inserting = (async () => {
      const acked: number[] = []
      const errors: string[] = []
      for (let i = from; i < from + count; i++) {
        try {
          await db().query('insert into shared_rows values ($1)', [i])
          acked.push(i)
        } catch (err) {
          errors.push((err as { code?: string }).code ?? (err as Error).message)
        }
      }
      return { acked, errors }
    })()
  },
  finishInserts: (): Promise<{ acked: number[]; errors: string[] }> => inserting!,
  async close(): Promise<void> {
    await db().close()
  },
}

;(globalThis as unknown as { pgwasmTabs: typeof api }).pgwasmTabs = api
export type TabsApi = typeof api
