import type { EngineLease } from '@pgwasm/pglite'
import { queryMessage } from '../wire/wire.js'

/*
 * A client idle in a transaction block holds the one engine session every
 * client shares, and the others wait for it: psycopg, JDBC and SQLAlchemy
 * open a block before their first read (autocommit off), and may then sit
 * in it for a minute. A READ COMMITTED block that has only read gives
 * nothing up when it ends and is begun again before the client's next
 * statement: every statement takes a new snapshot anyway. So, when another
 * client waits for the engine, such a block is committed on the engine
 * ("parked") and begun again, with the same modes, when its client sends
 * its next statement. The client is told nothing: it is still in its block.
 *
 * What it can see: `now()` and `transaction_timestamp()` move on, and the
 * relations it read are no longer locked against ALTER or DROP between its
 * statements. A block is never parked once it did anything that ending it
 * would change or lose: an xid (any write, `SELECT ... FOR UPDATE`),
 * another isolation level, a cursor or named portal (or a portal executed
 * for some rows), a savepoint, a SET (also `SET LOCAL`, `set_config()`),
 * LISTEN, NOTIFY or `pg_notify()`, LOCK TABLE, a transaction-level advisory
 * lock, `lo_open()`, an exported snapshot, in its own SQL or in any
 * function it called: the engine reports or counts each of them.
 */

/** Utility statements that leave a block as it could be begun again. */
const HARMLESS_UTILITY = new Set(['BEGIN', 'START TRANSACTION', 'COMMIT', 'ROLLBACK', 'SHOW', 'EXPLAIN', 'PREPARE', 'EXECUTE', 'DEALLOCATE'])

const COMMIT = queryMessage('commit')

/** The modes of a parked block, to begin it again with. */
interface Modes {
  readonly readOnly: boolean
  readonly deferrable: boolean
}

const discard = (): void => {}

/** One client's block: whether it may be parked, and whether it is. */
export class TransactionParking {
  /** The block did something that ending it early would change (see the top of this file). */
  #touched = false
  #parked: Modes | undefined
  /** Our own statements run: what the utility hook reports is not the client's. */
  #own = false
  /** The engine's count of calls whose effect lasts until the block ends, when the block began (or was begun again). */
  #boundCallsAtStart = 0

  /** The client's block is parked: the engine holds no block of it. */
  get parked(): boolean {
    return this.#parked !== undefined
  }

  /** A utility statement the engine's hook reports for the client (SET and set_config() in functions' SQL too). */
  noteUtility(tag: string): void {
    if (!this.#own && !HARMLESS_UTILITY.has(tag)) this.#touched = true
  }

  /**
   * The client executed a portal for some rows only: it may execute it on
   * after its Sync, in the same block, and an unnamed portal is not seen
   * among the block's cursors.
   */
  notePartialExecute(): void {
    this.#touched = true
  }

  /** The client's block ended (it is idle): the next one starts untouched. */
  ended(): void {
    this.#touched = false
    this.#parked = undefined
  }

  /**
   * Commits the client's block on the engine when nothing of it would be
   * lost (the engine must hold that block, idle between statements, status
   * T): true when it did, the engine then in no block.
   */
  park(lease: EngineLease): boolean {
    // Only this client ran on the engine since the count was taken: a call since is its own.
    if (this.#touched || this.#parked || lease.blockBoundCalls !== this.#boundCallsAtStart) return false
    // Read from the engine's memory: asking in SQL would cost the waiting client more than its own query.
    const block = lease.transactionBlock()
    if (!block || block.isolation !== 'read committed' || block.hasXid || block.savepoints > 0 || block.cursors > 0) return false
    this.#own = true
    try {
      lease.execProtocolRawStream(COMMIT, discard)
    } finally {
      this.#own = false
    }
    if (lease.inTransaction) return false
    this.#parked = { readOnly: block.readOnly, deferrable: block.deferrable }
    return true
  }

  /**
   * Before each of the client's batches (`inBlock`: the client is in a
   * block, as it was told). Begins a parked block again: its empty SELECT
   * takes the block's first snapshot, so a `SET TRANSACTION` is refused
   * after it as it was before the block was parked.
   */
  beforeBatch(lease: EngineLease, inBlock: boolean): void {
    const modes = this.#parked
    if (!modes) {
      if (!inBlock) this.#boundCallsAtStart = lease.blockBoundCalls
      return
    }
    this.#parked = undefined
    this.#boundCallsAtStart = lease.blockBoundCalls
    this.#own = true
    try {
      const mode = `${modes.readOnly ? 'read only' : 'read write'}, ${modes.deferrable ? 'deferrable' : 'not deferrable'}`
      lease.execProtocolRawStream(queryMessage(`begin isolation level read committed, ${mode}; select`), discard)
    } finally {
      this.#own = false
    }
  }
}
