/**
 * Prisma's transactions on the one pgwasm session. A transaction is a
 * `db.transaction()` callback kept open until Prisma commits or rolls back:
 * the instance's queue stays held meanwhile, so other queries (Prisma's or
 * anyone's) wait their turn instead of landing inside the transaction.
 */
import type { IsolationLevel, Transaction, TransactionOptions } from '@prisma/driver-adapter-utils'
import { DriverAdapterError } from '@prisma/driver-adapter-utils'
import { quoteIdent, type Transaction as PGliteTx } from '@pgwasm/pglite'
import { toAdapterError } from './errors.js'
import { PGliteQueryable, type AdapterDatabase } from './queryable.js'

/** The isolation levels PostgreSQL has (SNAPSHOT is SQL Server's). */
const ISOLATION_LEVELS: ReadonlySet<string> = new Set(['READ UNCOMMITTED', 'READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE'])

type Outcome = 'commit' | 'rollback'

/**
 * Prisma's transaction timeout timer is unref'd. When a transaction's
 * callback waits on the outer client (the deadlock Prisma documents), the
 * open transaction is all that is left, and Node would end a script with
 * exit code 13 and no message before that timer fired. A ref'd timer held
 * while any transaction is open keeps the process alive until Prisma's
 * timeout rolls back and reports P2028.
 */
let openTransactions = 0
let keepAlive: ReturnType<typeof setInterval> | undefined

function holdProcess(): void {
  if (openTransactions++ === 0) keepAlive = setInterval(() => {}, 2 ** 30)
}

function releaseProcess(): void {
  if (--openTransactions === 0) {
    clearInterval(keepAlive)
    keepAlive = undefined
  }
}

/** Savepoint names come from Prisma; quoting keeps any name a single identifier. */
const savepointName = quoteIdent

/** An open transaction of {@link PGliteAdapter}; Prisma ends it with `commit()` or `rollback()`. */
export class PGliteTransaction extends PGliteQueryable implements Transaction {
  /**
   * Phantom: Prisma calls `commit()`/`rollback()` without sending COMMIT or
   * ROLLBACK itself; ending the held `db.transaction()` sends them.
   */
  readonly options: TransactionOptions = { usePhantomQuery: true }
  readonly #tx: PGliteTx
  readonly #finish: (outcome: Outcome) => void
  readonly #done: () => Promise<void>
  #ended = false

  private constructor(db: AdapterDatabase, tx: PGliteTx, finish: (outcome: Outcome) => void, done: () => Promise<void>) {
    super(() => tx, () => db.parsers)
    this.#tx = tx
    this.#finish = finish
    this.#done = done
  }

  /**
   * Begins a transaction on `db`; resolves once BEGIN (and the isolation
   * level) ran, that is once earlier queued calls finished.
   */
  static begin(db: AdapterDatabase, isolationLevel: IsolationLevel | undefined): Promise<PGliteTransaction> {
    if (isolationLevel !== undefined && !ISOLATION_LEVELS.has(isolationLevel)) {
      return Promise.reject(new DriverAdapterError({ kind: 'InvalidIsolationLevel', level: isolationLevel }))
    }
    return new Promise<PGliteTransaction>((resolve, reject) => {
      let started = false
      let finish!: (outcome: Outcome) => void
      const outcome = new Promise<Outcome>((settle) => {
        finish = settle
      })
      const done: Promise<void> = db.transaction(async (tx) => {
        if (isolationLevel) await tx.query(`SET TRANSACTION ISOLATION LEVEL ${isolationLevel}`)
        started = true
        holdProcess()
        try {
          resolve(new PGliteTransaction(db, tx, finish, () => done))
          if ((await outcome) === 'rollback') await tx.rollback()
        } finally {
          releaseProcess()
        }
      })
      done.catch((error: unknown) => {
        // Before start the error is the begin's; after it, commit()/rollback() report it.
        if (!started) reject(toAdapterError(error))
      })
    })
  }

  /** Commits; a transaction a failed statement aborted is rolled back and reported (SQLSTATE 25P02). */
  async commit(): Promise<void> {
    await this.#end('commit')
  }

  /** Rolls back. */
  async rollback(): Promise<void> {
    await this.#end('rollback')
  }

  async #end(outcome: Outcome): Promise<void> {
    if (this.#ended) {
      throw new DriverAdapterError({ kind: 'TransactionAlreadyClosed', cause: `the transaction was already ended, ${outcome} is not possible` })
    }
    this.#ended = true
    this.#finish(outcome)
    try {
      await this.#done()
    } catch (error) {
      throw toAdapterError(error)
    }
  }

  /** `SAVEPOINT name` (Prisma's nested transactions). */
  async createSavepoint(name: string): Promise<void> {
    await this.#exec(`SAVEPOINT ${savepointName(name)}`)
  }

  /** `ROLLBACK TO SAVEPOINT name`. */
  async rollbackToSavepoint(name: string): Promise<void> {
    await this.#exec(`ROLLBACK TO SAVEPOINT ${savepointName(name)}`)
  }

  /** `RELEASE SAVEPOINT name`. */
  async releaseSavepoint(name: string): Promise<void> {
    await this.#exec(`RELEASE SAVEPOINT ${savepointName(name)}`)
  }

  async #exec(sql: string): Promise<void> {
    try {
      await this.#tx.exec(sql)
    } catch (error) {
      throw toAdapterError(error)
    }
  }
}
