import type { Field, RowShape } from '../protocol/decode.js'

/** A named prepared statement the engine holds for one SQL text. */
export interface CachedStatement {
  readonly name: string
  readonly paramTypes: readonly number[]
  /** The row shape built with the instance's parsers; null when the statement returns no rows. */
  readonly shape: RowShape | null
  readonly fields: Field[] | null
  /**
   * The engine's `catalogChanges` when it was prepared: once DDL ran since,
   * its frozen parameter types and columns may name objects that changed.
   */
  readonly catalog: number
}

/**
 * Bounded LRU of prepared statements, keyed by SQL text (and explicit
 * parameter types). Evicted statements are closed on the engine with the next
 * request, so the session never accumulates them.
 */
export class StatementCache {
  readonly #max: number
  readonly #entries = new Map<string, CachedStatement>()
  #counter = 0
  /** Names to Close on the engine before the next request. */
  pendingCloses: string[] = []

  constructor(max: number) {
    this.#max = max
  }

  get enabled(): boolean {
    return this.#max > 0
  }

  get size(): number {
    return this.#entries.size
  }

  get(key: string): CachedStatement | undefined {
    const entry = this.#entries.get(key)
    if (entry) {
      // Re-insert to mark it most recently used (Map keeps insertion order).
      this.#entries.delete(key)
      this.#entries.set(key, entry)
    }
    return entry
  }

  nextName(): string {
    return `pgwasm_${++this.#counter}`
  }

  set(key: string, statement: CachedStatement): void {
    const old = this.#entries.get(key)
    if (old && old.name !== statement.name) this.pendingCloses.push(old.name)
    this.#entries.delete(key)
    this.#entries.set(key, statement)
    while (this.#entries.size > this.#max) {
      const [oldestKey, oldest] = this.#entries.entries().next().value as [string, CachedStatement]
      this.#entries.delete(oldestKey)
      this.pendingCloses.push(oldest.name)
    }
  }

  /** Forgets a statement and closes it on the engine. */
  drop(key: string): void {
    const entry = this.#entries.get(key)
    if (!entry) return
    this.#entries.delete(key)
    this.pendingCloses.push(entry.name)
  }

  /** Forgets every statement without closing (the session lost them, e.g. DISCARD ALL). */
  forgetAll(): void {
    this.#entries.clear()
    this.pendingCloses = []
  }

  /** Forgets every statement and closes them on the engine. */
  clear(): void {
    for (const entry of this.#entries.values()) this.pendingCloses.push(entry.name)
    this.#entries.clear()
  }
}
