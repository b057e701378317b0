import type { LiveDb } from './types.js'
import { tablesOf } from './tables.js'
import type { TableWatch, TableWatcher } from './triggers.js'

/** What a live query needs from the namespace that made it. */
export interface LiveContext {
  readonly db: LiveDb
  readonly watch: TableWatch
  /** Errors nobody awaits. */
  report(error: unknown): void
  /** Called once when a live query ends. */
  forget(subscription: object): void
}

/** Rejects a start that `end()` overtook (the namespace closed meanwhile). */
export class LiveEndedError extends Error {
  constructor() {
    super('the live query ended before it started (its namespace or database closed)')
    this.name = 'LiveEndedError'
  }
}

interface Waiter {
  resolve(): void
  reject(error: unknown): void
}

/**
 * The life of one live query: its tables' triggers, its callbacks, and its
 * refreshes. Refreshes are coalesced: a change notice only marks the query
 * stale and one refresh runs a microtask later, so every notice of one
 * commit (several tables) makes one refresh; notices while a refresh runs
 * make exactly one more after it. A subclass says how a run turns rows into
 * what its callbacks get.
 */
export abstract class Subscription<R> implements TableWatcher {
  protected readonly ctx: LiveContext
  protected readonly sql: string
  protected readonly params: readonly unknown[]
  #tables: readonly number[] = []
  #callbacks: ((value: R) => void)[]
  #dead = false
  #scheduled = false
  #running = false
  #again = false
  #waiters: Waiter[] = []

  constructor(ctx: LiveContext, sql: string, params: readonly unknown[], callback: ((value: R) => void) | undefined) {
    this.ctx = ctx
    this.sql = sql
    this.params = params
    this.#callbacks = callback ? [callback] : []
  }

  /** One run of the query: what the callbacks get. */
  protected abstract run(): Promise<R>

  get ended(): boolean {
    return this.#dead
  }

  /**
   * Finds the tables, installs their triggers, then runs the query once: in
   * that order no committed write is missed (one before the triggers is in
   * the first run; one after them notifies, at worst refreshing once more).
   * Call {@link begin} after handing the result out.
   */
  async start(): Promise<R> {
    const { db, watch } = this.ctx
    const tables = await tablesOf(db, this.sql, this.params)
    if (this.#dead) throw new LiveEndedError()
    // Set before watching: an end() from now on unwatches exactly these.
    this.#tables = tables
    await watch.watch(this, tables)
    if (this.#dead) throw new LiveEndedError()
    // Notices during the first run wait for begin().
    this.#running = true
    try {
      const value = await this.run()
      if (this.#dead) throw new LiveEndedError()
      return value
    } catch (err) {
      await this.end()
      throw err
    }
  }

  /** Lets refreshes run; one is due if a table changed during the first run. */
  begin(): void {
    this.#running = false
    if (this.#again) this.#schedule()
  }

  tableChanged(): void {
    if (this.#running) this.#again = true
    else this.#schedule()
  }

  /** Calls every callback; one that throws does not keep the others from their value. */
  emit(value: R): void {
    for (const callback of [...this.#callbacks]) {
      try {
        callback(value)
      } catch (err) {
        this.ctx.report(err)
      }
    }
  }

  subscribe(callback: (value: R) => void): void {
    if (this.#dead) throw new Error('the live query has ended and cannot be subscribed to')
    this.#callbacks.push(callback)
  }

  /** Removes `callback` (all without one); the last one leaving ends the query. */
  async unsubscribe(callback?: (value: R) => void): Promise<void> {
    this.#callbacks = callback ? this.#callbacks.filter((cb) => cb !== callback) : []
    if (this.#callbacks.length === 0) await this.end()
  }

  /** Resolves after a run that started after this call (and its callbacks). */
  refresh(): Promise<void> {
    if (this.#dead) return Promise.resolve()
    return new Promise<void>((resolve, reject) => {
      this.#waiters.push({ resolve, reject })
      this.tableChanged()
    })
  }

  /** Stops refreshes and releases the tables; idempotent. Quiet once the database is closing. */
  async end(): Promise<void> {
    if (this.#dead) return
    this.#dead = true
    this.#callbacks = []
    this.ctx.forget(this)
    for (const waiter of this.#waiters.splice(0)) waiter.resolve()
    try {
      await this.ctx.watch.unwatch(this, this.#tables)
    } catch (err) {
      if (this.ctx.db.ready) throw err
    }
  }

  #schedule(): void {
    if (this.#scheduled || this.#dead) return
    this.#scheduled = true
    queueMicrotask(() => void this.#drain())
  }

  async #drain(): Promise<void> {
    this.#scheduled = false
    this.#running = true
    try {
      do {
        this.#again = false
        const waiters = this.#waiters.splice(0)
        // Nobody to tell: the next run diffs against what was last told.
        if (this.#callbacks.length === 0) {
          for (const waiter of waiters) waiter.resolve()
          continue
        }
        try {
          const value = await this.run()
          if (!this.#dead) this.emit(value)
          for (const waiter of waiters) waiter.resolve()
        } catch (err) {
          for (const waiter of waiters) waiter.reject(err)
          // After close() a failed refresh is expected, not news.
          if (waiters.length === 0 && !this.#dead && this.ctx.db.ready) this.ctx.report(err)
        }
      } while (this.#again && !this.#dead)
    } finally {
      this.#running = false
    }
  }
}
