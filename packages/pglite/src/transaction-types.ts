import type { ChannelListener } from './notify.js'
import type { QueryOptions, Results } from './query/results.js'

/** The transaction handle passed to {@link PGlite.transaction}'s callback. */
export interface Transaction {
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>>
  sql<T = Record<string, unknown>>(strings: TemplateStringsArray, ...params: unknown[]): Promise<Results<T>>
  exec(sql: string, options?: QueryOptions): Promise<Results[]>
  /** Rolls back now; the callback's return value is still returned. */
  rollback(): Promise<void>
  listen(channel: string, callback: ChannelListener): Promise<(tx?: Transaction) => Promise<void>>
  readonly closed: boolean
}
