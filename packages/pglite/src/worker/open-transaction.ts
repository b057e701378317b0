import type { PGlite } from '../pglite.js'
import type { Transaction } from '../transaction-types.js'

/**
 * A transaction held open in the worker while the page's callback runs: the
 * core's `transaction()` holds the engine, and the page's `end` message
 * decides between commit and rollback. Every statement in between comes as
 * its own message and runs on {@link tx}.
 */
export class OpenTransaction {
  /** The core's handle; set once BEGIN ran (after {@link opened}). */
  tx: Transaction | undefined
  /** Resolves once BEGIN ran; rejects when the transaction could not start. */
  readonly opened: Promise<void>
  readonly #done: Promise<void>
  #decide!: (commit: boolean) => void

  constructor(db: PGlite) {
    const decided = new Promise<boolean>((resolve) => (this.#decide = resolve))
    let markOpened!: () => void
    const opened = new Promise<void>((resolve) => (markOpened = resolve))
    this.#done = db.transaction(async (tx) => {
      this.tx = tx
      markOpened()
      // Returning commits; an explicit rollback (rather than a throw) keeps
      // the core's error path for real failures only.
      if (!(await decided) && !tx.closed) await tx.rollback()
    })
    // `race` also observes a failure of #done that comes before `end` is
    // called, so it is never an unhandled rejection.
    this.opened = Promise.race([opened, this.#done])
  }

  /**
   * Commits (unless the transaction was rolled back already) or rolls back.
   * @throws {DatabaseError} code `25P02` when COMMIT found the transaction aborted.
   */
  end(commit: boolean): Promise<void> {
    this.#decide(commit)
    return this.#done
  }
}
