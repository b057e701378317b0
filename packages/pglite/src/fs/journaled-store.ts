import type { PostgresModule } from '../engine/emscripten.js'
import { MemfsJournal } from '../engine/files/memfs-journal.js'
import { PGDATA } from '../engine/backend/module.js'
import type { DataTree } from '../engine/files/pgdata-tree.js'
import type { FsChanges } from '../engine/files/memfs-journal.js'
import { IdbStore } from './idb-store.js'
import { OpfsStore } from './opfs-store.js'

/** Where a journaled data directory is kept: IndexedDB (`idb://`) or the origin private file system (`opfs-ahp://`). */
interface JournalStore {
  load(): Promise<DataTree | undefined>
  create(tree: DataTree, engineVersion: string): Promise<void>
  apply(changes: FsChanges, durability: 'strict' | 'relaxed'): Promise<void>
  /** Set by the persistence: the whole tree now, for a store that may start over from it (opfs-store.ts). */
  currentTree?: () => DataTree | undefined
  close(): void
}

/**
 * Keeps an `idb://` database in IndexedDB, or an `opfs-ahp://` one in the
 * origin private file system (a {@link JournalStore} each): Postgres runs on MEMFS, a
 * journal records what each request changed, and `flush()` stores only
 * that. Default durability: a request's promise resolves after its changes
 * are committed to IndexedDB; `relaxed`: the write is queued and the
 * promise does not wait (a closed tab can lose the last commits, never
 * corrupt the database: chunks of one flush are stored in one transaction).
 */
export class JournaledStore {
  readonly #store: JournalStore
  readonly #relaxed: boolean
  #journal: MemfsJournal | undefined
  /** Relaxed mode's queued writes, in order. */
  #pending: Promise<void> = Promise.resolve()
  #failure: unknown
  /** A new database's first write (the whole initial tree), running while Postgres boots. */
  #base: Promise<void> | undefined

  private constructor(store: JournalStore, relaxed: boolean, base?: Promise<void>) {
    this.#store = store
    this.#relaxed = relaxed
    this.#base = base
    base?.catch(() => {})
  }

  /**
   * Opens the store (taking its lock) and returns the tree to start from:
   * the stored one, or for a new database `create()`'s, stored first.
   */
  static async open(
    name: string,
    options: { relaxed: boolean; engineVersion: Promise<string>; create: () => Promise<DataTree>; scheme?: 'idb' | 'opfs-ahp' },
  ): Promise<{ persistence: JournaledStore; tree: DataTree; created: boolean }> {
    const store: JournalStore = options.scheme === 'opfs-ahp' ? await OpfsStore.open(name) : await IdbStore.open(name)
    try {
      const stored = await store.load()
      if (stored) return { persistence: new JournaledStore(store, options.relaxed), tree: stored, created: false }
      const tree = await options.create()
      // Not awaited here: every flush waits for it, so no commit is reported stored before its base is.
      const base = options.engineVersion.then((version) => store.create(tree, version))
      return { persistence: new JournaledStore(store, options.relaxed, base), tree, created: true }
    } catch (err) {
      store.close()
      throw err
    }
  }

  /** Starts journaling the mounted data directory (before Postgres starts). */
  attach(mod: PostgresModule): void {
    const journal = new MemfsJournal(mod, PGDATA)
    this.#journal = journal
    // Not after discard(): a dead engine's files may hold a half-written page.
    this.#store.currentTree = () => (this.#journal === journal ? journal.viewTree() : undefined)
  }

  /** Stores what changed since the last flush; `undefined` when there is nothing to wait for. */
  flush(): Promise<void> | undefined {
    const journal = this.#journal
    if (!journal?.pending) return undefined
    const changes = journal.take()
    const base = this.#base
    if (!this.#relaxed) return base ? base.then(() => this.#store.apply(changes, 'strict')) : this.#store.apply(changes, 'strict')
    this.#pending = this.#pending.then(async () => {
      try {
        await base
        await this.#store.apply(changes, 'relaxed')
      } catch (err) {
        this.#failure ??= err
      }
    })
    return undefined
  }

  /** Final flush (after the shutdown checkpoint), then closes the store and frees its lock. */
  /**
   * Lets go of the store without storing what the journal holds since the
   * last flush: the engine died, and its files may hold a page it was half
   * way through writing (idb:// runs without full-page writes). Flushes
   * already under way finish first, so a reopen reads every commit.
   */
  async discard(): Promise<void> {
    this.#journal = undefined
    try {
      await this.#base
      await this.#pending
    } catch {
      // Reported to the calls whose flush it was.
    } finally {
      this.#store.close()
    }
  }

  async close(): Promise<void> {
    try {
      await this.#base
      await this.flush()
      await this.#pending
      if (this.#failure) throw this.#failure
    } finally {
      this.#journal = undefined
      this.#store.close()
    }
  }
}
