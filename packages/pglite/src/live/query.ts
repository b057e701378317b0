import type { Results } from '../query/results.js'
import { sharedQuery } from './shared.js'
import { Subscription, type LiveContext } from './subscription.js'
import type { LiveQueryResults } from './types.js'

/** The part of the results a windowed query shows. */
export interface LiveWindow {
  offset: number
  limit: number
}

/** `live.query()`: the whole results on every refresh, or a window of them with the total count. */
export class PlainLiveQuery<T> extends Subscription<LiveQueryResults<T>> {
  #window: LiveWindow | undefined

  constructor(
    ctx: LiveContext,
    sql: string,
    params: readonly unknown[],
    window: LiveWindow | undefined,
    callback: ((results: LiveQueryResults<T>) => void) | undefined,
  ) {
    super(ctx, sql, params, callback)
    this.#window = window
  }

  get windowed(): boolean {
    return this.#window !== undefined
  }

  /** Moves the window; the next run shows it. */
  moveWindow(offset: number | undefined, limit: number | undefined): void {
    if (!this.#window) return
    this.#window = { offset: offset ?? this.#window.offset, limit: limit ?? this.#window.limit }
  }

  protected async run(): Promise<LiveQueryResults<T>> {
    const { db } = this.ctx
    const window = this.#window
    if (!window) return sharedQuery<T>(db, this.sql, this.params)
    // The SQL goes in a subquery; a newline ends a trailing `--` comment, and a trailing `;` would end the statement.
    const inner = `(${this.sql.replace(/;\s*$/, '')}\n)`
    const n = this.params.length
    const page: Results<T> = await db.query<T>(
      `SELECT * FROM ${inner} AS pgwasm_live_window LIMIT $${n + 1} OFFSET $${n + 2}`,
      [...this.params, window.limit, window.offset],
    )
    const count = await db.query<[unknown]>(`SELECT count(*) FROM ${inner} AS pgwasm_live_count`, this.params, {
      rowMode: 'array',
    })
    return { ...page, offset: window.offset, limit: window.limit, totalCount: Number(count.rows[0]?.[0] ?? 0) }
  }
}
