import type { LiveDb } from './types.js'
import type { ChangeRow } from './diff.js'
import { ChangesLiveQuery, IncrementalLiveQuery } from './keyed.js'
import { PlainLiveQuery, type LiveWindow } from './query.js'
import { LiveEndedError, type LiveContext, type Subscription } from './subscription.js'
import { tableWatchOf, type TableWatch } from './triggers.js'
import type {
  Change,
  LiveChanges,
  LiveChangesOptions,
  LiveHandle,
  LiveIncrementalQueryOptions,
  LiveOptions,
  LiveParams,
  LiveQuery,
  LiveQueryOptions,
  LiveQueryResults,
  Row,
} from './types.js'

/** Reports an error nobody awaits; a live refresh runs on its own, so there is no caller to reject. */
function defaultReport(error: unknown): void {
  console.error('[pgwasm live]', error)
}

function checkWindow(offset: unknown, limit: unknown): LiveWindow | undefined {
  if ((offset === undefined) !== (limit === undefined)) throw new Error('offset and limit must be provided together')
  if (offset === undefined) return undefined
  if (typeof offset !== 'number' || Number.isNaN(offset) || typeof limit !== 'number' || Number.isNaN(limit)) {
    throw new Error('offset and limit must be numbers')
  }
  return { offset, limit }
}

/** Ends `subscription` when `signal` aborts (now, if it already has). */
async function bindSignal<R>(signal: AbortSignal | undefined, subscription: Subscription<R>, report: (e: unknown) => void): Promise<void> {
  if (!signal) return
  if (signal.aborted) {
    await subscription.end()
    return
  }
  signal.addEventListener('abort', () => void subscription.end().catch(report), { once: true })
}

class LiveNamespaceImpl implements LiveHandle, LiveContext {
  readonly db: LiveDb
  readonly watch: TableWatch
  readonly report: (error: unknown) => void
  readonly #active = new Set<{ end(): Promise<void> }>()
  #closed = false
  #closing: Promise<void> | undefined

  constructor(db: LiveDb, options: LiveOptions) {
    this.db = db
    this.watch = tableWatchOf(db)
    this.report = options.onError ?? defaultReport
  }

  /** Starts `subscription` as one of this namespace's; its first value goes to its callbacks before this resolves. */
  async #start<R>(subscription: Subscription<R>, signal: AbortSignal | undefined): Promise<R> {
    if (this.#closed) throw new LiveEndedError()
    this.#active.add(subscription)
    let value: R
    try {
      value = await subscription.start()
    } catch (err) {
      this.#active.delete(subscription)
      throw err
    }
    await bindSignal(signal, subscription, this.report)
    subscription.emit(value)
    subscription.begin()
    return value
  }

  forget(subscription: object): void {
    this.#active.delete(subscription as { end(): Promise<void> })
  }

  query<T = Row>(query: string, params?: LiveParams, callback?: (results: LiveQueryResults<T>) => void): Promise<LiveQuery<T>>
  query<T = Row>(options: LiveQueryOptions<T>): Promise<LiveQuery<T>>
  async query<T = Row>(
    query: string | LiveQueryOptions<T>,
    params?: LiveParams,
    callback?: (results: LiveQueryResults<T>) => void,
  ): Promise<LiveQuery<T>> {
    const options: LiveQueryOptions<T> = typeof query === 'string' ? { query, params, callback } : query
    const window = checkWindow(options.offset, options.limit)
    const sub = new PlainLiveQuery<T>(this, options.query, options.params ?? [], window, options.callback)
    const initialResults = await this.#start(sub, options.signal)
    return {
      initialResults,
      subscribe: (cb) => sub.subscribe(cb),
      unsubscribe: (cb) => sub.unsubscribe(cb),
      refresh: (opts) => {
        if (!sub.windowed && (opts?.offset !== undefined || opts?.limit !== undefined)) {
          return Promise.reject(new Error('offset and limit cannot be provided for non-windowed queries'))
        }
        if ((opts?.offset !== undefined && Number.isNaN(opts.offset)) || (opts?.limit !== undefined && Number.isNaN(opts.limit))) {
          return Promise.reject(new Error('offset and limit must be numbers'))
        }
        sub.moveWindow(opts?.offset, opts?.limit)
        return sub.refresh()
      },
    }
  }

  incrementalQuery<T = Row>(
    query: string,
    params: LiveParams,
    key: string,
    callback?: (results: LiveQueryResults<T>) => void,
  ): Promise<LiveQuery<T>>
  incrementalQuery<T = Row>(options: LiveIncrementalQueryOptions<T>): Promise<LiveQuery<T>>
  async incrementalQuery<T = Row>(
    query: string | LiveIncrementalQueryOptions<T>,
    params?: LiveParams,
    key?: string,
    callback?: (results: LiveQueryResults<T>) => void,
  ): Promise<LiveQuery<T>> {
    const options: Partial<LiveIncrementalQueryOptions<T>> & { query: string } =
      typeof query === 'string' ? { query, params, key, callback } : query
    if (!options.key) throw new Error('key is required for incremental queries')
    const sub = new IncrementalLiveQuery<T>(this, options.query, options.params ?? [], options.key, options.callback)
    const initialResults = await this.#start(sub, options.signal)
    return {
      initialResults,
      subscribe: (cb) => sub.subscribe(cb),
      unsubscribe: (cb) => sub.unsubscribe(cb),
      refresh: () => sub.refresh(),
    }
  }

  changes<T = Row>(
    query: string,
    params: LiveParams,
    key: string,
    callback?: (changes: Array<Change<T>>) => void,
  ): Promise<LiveChanges<T>>
  changes<T = Row>(options: LiveChangesOptions<T>): Promise<LiveChanges<T>>
  async changes<T = Row>(
    query: string | LiveChangesOptions<T>,
    params?: LiveParams,
    key?: string,
    callback?: (changes: Array<Change<T>>) => void,
  ): Promise<LiveChanges<T>> {
    const options: Partial<LiveChangesOptions<T>> & { query: string } =
      typeof query === 'string' ? { query, params, key, callback } : query
    if (!options.key) throw new Error('key is required for changes queries')
    // The rows are T's columns plus the change fields: the public type says so, the diff builds it.
    const asChanges = (rows: ChangeRow[]): Array<Change<T>> => rows as unknown as Array<Change<T>>
    // Callers hold their own functions; the subscription holds adapters of them.
    const adapters = new Map<(changes: Array<Change<T>>) => void, (rows: ChangeRow[]) => void>()
    const adapt = (cb: (changes: Array<Change<T>>) => void): ((rows: ChangeRow[]) => void) => {
      let inner = adapters.get(cb)
      if (!inner) adapters.set(cb, (inner = (rows) => cb(asChanges(rows))))
      return inner
    }
    const sub = new ChangesLiveQuery(this, options.query, options.params ?? [], options.key, options.callback && adapt(options.callback))
    const initialChanges = asChanges(await this.#start(sub, options.signal))
    return {
      fields: sub.fields,
      initialChanges,
      subscribe: (cb) => sub.subscribe(adapt(cb)),
      unsubscribe: async (cb) => {
        if (!cb) return sub.unsubscribe()
        const inner = adapters.get(cb)
        adapters.delete(cb)
        if (inner) await sub.unsubscribe(inner)
      },
      refresh: () => sub.refresh(),
    }
  }

  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    this.#closed = true
    const results = await Promise.allSettled([...this.#active].map((sub) => sub.end()))
    this.#active.clear()
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed) throw failed.reason
  }
}

/**
 * Live queries on `db` without the `extensions` option. Close the handle
 * before the database (`PGlite.create({ extensions: { live } })` does it
 * for you); its temporary triggers go with the session anyway.
 *
 * @example
 * ```ts
 * const lq = createLive(db)
 * const { initialResults, unsubscribe } = await lq.query('select * from todo', [], (r) => render(r.rows))
 * await lq.close()
 * ```
 */
export function createLive(db: LiveDb, options: LiveOptions = {}): LiveHandle {
  return new LiveNamespaceImpl(db, options)
}
