import type { PGlite } from '../pglite.js'
import type { ChannelListener } from '../notify.js'
import type { QueryOptions, Results } from '../query/results.js'

/** A result row as `query()` returns it by default. */
export type Row = Record<string, unknown>

/** Parameters of a live query's SQL (`$1`, `$2`, ...). */
export type LiveParams = readonly unknown[] | null | undefined

/** Results of a live query; a windowed one (`offset` + `limit`) also has its window and the full row count. */
export interface LiveQueryResults<T> extends Results<T> {
  totalCount?: number
  offset?: number
  limit?: number
}

/** A running live query, from {@link LiveNamespace.query} or {@link LiveNamespace.incrementalQuery}. */
export interface LiveQuery<T> {
  /** The results when the live query started (also passed to its callback). */
  initialResults: LiveQueryResults<T>
  /** Adds a callback; it gets every refresh from now on. Throws once the live query ended. */
  subscribe: (callback: (results: LiveQueryResults<T>) => void) => void
  /**
   * Removes `callback`, or every callback without one. With none left the
   * live query ends and its triggers go once no other live query needs them.
   */
  unsubscribe: (callback?: (results: LiveQueryResults<T>) => void) => Promise<void>
  /**
   * Re-runs the query now and resolves after the callbacks ran; a windowed
   * query can move its window. Calls made during one refresh share the next.
   */
  refresh: (options?: { offset?: number; limit?: number }) => Promise<void>
}

/** A running changes query, from {@link LiveNamespace.changes}. */
export interface LiveChanges<T = Row> {
  /** The query's columns. */
  fields: { name: string; dataTypeID: number }[]
  /** Every row of the first run, as inserts. */
  initialChanges: Array<Change<T>>
  subscribe: (callback: (changes: Array<Change<T>>) => void) => void
  unsubscribe: (callback?: (changes: Array<Change<T>>) => void) => Promise<void>
  refresh: () => Promise<void>
}

/**
 * A row that entered the results: every column, and in `__after__` the key
 * of the row before it (`null` when first).
 */
export type ChangeInsert<T> = {
  __changed_columns__: string[]
  __op__: 'INSERT'
  __after__: unknown
} & T

/** A row that left the results: its key column; the other columns and `__after__` are `null`. */
export type ChangeDelete<T> = {
  __changed_columns__: string[]
  __op__: 'DELETE'
  __after__: null
} & T

/**
 * A row whose columns or position changed: the key, the new value of each
 * column named in `__changed_columns__` and `null` for the others.
 * `'__after__'` is listed when the row moved; `__after__` is then the key of
 * the row now before it.
 */
export type ChangeUpdate<T> = {
  __changed_columns__: string[]
  __op__: 'UPDATE'
  __after__: unknown
} & T

/** Start over from an empty result (PGlite sends it after losing its state; kept for typing compatibility). */
export type ChangeReset<T> = {
  __op__: 'RESET'
} & T

/** One change of a {@link LiveNamespace.changes} query, shaped as PGlite's live extension sends it. */
export type Change<T> = ChangeInsert<T> | ChangeDelete<T> | ChangeUpdate<T> | ChangeReset<T>

/** Options form of {@link LiveNamespace.query}. */
export interface LiveQueryOptions<T = Row> {
  query: string
  params?: LiveParams
  /** With `limit`: only this window of the results, plus `totalCount`. */
  offset?: number
  limit?: number
  callback?: (results: LiveQueryResults<T>) => void
  /** Ends the live query when aborted. */
  signal?: AbortSignal
}

/** Options form of {@link LiveNamespace.changes}. */
export interface LiveChangesOptions<T = Row> {
  query: string
  params?: LiveParams
  /** A column whose value is unique per row. */
  key: string
  callback?: (changes: Array<Change<T>>) => void
  signal?: AbortSignal
}

/** Options form of {@link LiveNamespace.incrementalQuery}. */
export interface LiveIncrementalQueryOptions<T = Row> {
  query: string
  params?: LiveParams
  /** A column whose value is unique per row. */
  key: string
  callback?: (results: LiveQueryResults<T>) => void
  signal?: AbortSignal
}

/**
 * `db.live`: queries whose callbacks run again after every committed write
 * to a table they read, whichever API or socket client made it.
 */
export interface LiveNamespace {
  /**
   * Runs `query` now and again after each committed change to a table it
   * reads; `callback` gets the initial results too.
   */
  query<T = Row>(query: string, params?: LiveParams, callback?: (results: LiveQueryResults<T>) => void): Promise<LiveQuery<T>>
  query<T = Row>(options: LiveQueryOptions<T>): Promise<LiveQuery<T>>
  /**
   * Like {@link query}, sending what changed by `key` since the last run
   * (the initial call: every row as an insert).
   */
  changes<T = Row>(
    query: string,
    params: LiveParams,
    key: string,
    callback?: (changes: Array<Change<T>>) => void,
  ): Promise<LiveChanges<T>>
  changes<T = Row>(options: LiveChangesOptions<T>): Promise<LiveChanges<T>>
  /**
   * Like {@link query}, matching rows by `key` across refreshes: an unchanged
   * row keeps its object, and with nothing changed the `rows` array itself is
   * kept, so a UI can skip work by identity.
   */
  incrementalQuery<T = Row>(
    query: string,
    params: LiveParams,
    key: string,
    callback?: (results: LiveQueryResults<T>) => void,
  ): Promise<LiveQuery<T>>
  incrementalQuery<T = Row>(options: LiveIncrementalQueryOptions<T>): Promise<LiveQuery<T>>
}

/** {@link LiveNamespace} made by `createLive(db)`, which its owner must close. */
export interface LiveHandle extends LiveNamespace {
  /** Ends every live query of this handle and removes their triggers; later calls reject. Idempotent. */
  close(): Promise<void>
}

/** Options of `createLive(db, options)`. */
export interface LiveOptions {
  /**
   * Receives errors no caller awaits: a refresh after a write that failed
   * (e.g. its table was dropped) or a callback that threw.
   * @default console.error
   */
  onError?: (error: unknown) => void
}

/**
 * What live queries need of a database: a `PGlite`, or a `PGliteWorker`
 * (whose database may be shared with other tabs, hence `onLeaderChange`).
 */
export interface LiveDb {
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>>
  exec(sql: string, options?: QueryOptions): Promise<Results[]>
  listen(channel: string, callback: ChannelListener): Promise<() => Promise<void>>
  readonly ready: boolean
  readonly closed: boolean
  /**
   * Present on a `PGliteWorker`: called when another tab's worker (or this
   * one's) starts running the database, in a new session without this
   * page's temporary triggers.
   */
  onLeaderChange?(callback: () => void): () => void
}

/** A database created with `extensions: { live }`. */
export type PGliteWithLive = PGlite & { live: LiveNamespace }

