/**
 * The Prisma driver adapter for pgwasm: `new PrismaClient({ adapter: new PrismaPGlite(db) })`.
 */
import type {
  ConnectionInfo,
  IsolationLevel,
  SqlDriverAdapter,
  SqlMigrationAwareDriverAdapterFactory,
  Transaction,
} from '@prisma/driver-adapter-utils'
import { PGlite } from '@pgwasm/pglite'
import { toAdapterError } from './errors.js'
import { ADAPTER_NAME, PGliteQueryable, type AdapterDatabase } from './queryable.js'
import { PGliteTransaction } from './transaction.js'

/** Options of {@link PrismaPGlite}. */
export interface PrismaPGliteOptions {
  /**
   * The PostgreSQL schema Prisma's models live in, reported to the engine
   * (as `@prisma/adapter-pg`'s `schema` option). Default: the session's
   * `search_path` (`public`).
   */
  schema?: string
}

/** The database an adapter runs on: an instance, or a function returning the current one (see `TestDatabase`). */
export type DatabaseSource = AdapterDatabase | (() => AdapterDatabase)

function resolver(source: DatabaseSource): () => AdapterDatabase {
  return typeof source === 'function' ? source : () => source
}

/**
 * The driver adapter Prisma's engine talks to: queries go straight to the
 * core's statement-cached query path (no wire protocol, no JS client), and
 * transactions hold the instance's queue (see {@link PGliteTransaction}).
 */
export class PGliteAdapter extends PGliteQueryable implements SqlDriverAdapter {
  readonly #db: () => AdapterDatabase
  readonly #options: PrismaPGliteOptions
  readonly #onDispose: (() => Promise<void>) | undefined

  /**
   * @param db the database, or a function returning the current one.
   * @param onDispose what `dispose()` does beyond nothing (a shadow database closes itself).
   */
  constructor(db: DatabaseSource, options: PrismaPGliteOptions = {}, onDispose?: () => Promise<void>) {
    const current = resolver(db)
    super(current, () => current().parsers)
    this.#db = current
    this.#options = options
    this.#onDispose = onDispose
  }

  /**
   * Runs a script of one or more statements in one simple-protocol request,
   * so PostgreSQL runs it as one implicit transaction: all of it or nothing.
   */
  async executeScript(script: string): Promise<void> {
    try {
      await this.#db().exec(script)
    } catch (error) {
      throw toAdapterError(error)
    }
  }

  /** Begins a transaction; it waits for calls queued before it, and calls after it wait until it ends. */
  startTransaction(isolationLevel?: IsolationLevel): Promise<Transaction> {
    return PGliteTransaction.begin(this.#db(), isolationLevel)
  }

  /** What the engine needs to know of the connection. */
  getConnectionInfo(): ConnectionInfo {
    return { schemaName: this.#options.schema, supportsRelationJoins: true }
  }

  /** Leaves the database open: it belongs to whoever created it. */
  async dispose(): Promise<void> {
    await this.#onDispose?.()
  }
}

/**
 * Prisma's adapter factory for a pgwasm database.
 *
 * @example
 * ```ts
 * import { PGlite } from '@pgwasm/pglite'
 * import { PrismaPGlite } from '@pgwasm/pglite-prisma'
 * import { PrismaClient } from './generated/prisma/client.js'
 *
 * const db = await PGlite.create()
 * const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })
 * ```
 */
export class PrismaPGlite implements SqlMigrationAwareDriverAdapterFactory {
  readonly provider = 'postgres' as const
  readonly adapterName = ADAPTER_NAME
  readonly #db: DatabaseSource
  readonly #options: PrismaPGliteOptions

  /**
   * @param db the database; a function is called for every query, so the
   *   adapter follows a database that is swapped (a test reset).
   */
  constructor(db: DatabaseSource, options: PrismaPGliteOptions = {}) {
    this.#db = db
    this.#options = options
  }

  /** The adapter Prisma's engine uses. Prisma calls this once per client. */
  async connect(): Promise<SqlDriverAdapter> {
    return new PGliteAdapter(this.#db, this.#options)
  }

  /**
   * A fresh, empty in-memory database for the schema engine's shadow-database
   * work (diffs from a migrations folder); closed when the engine disposes it.
   */
  async connectToShadowDb(): Promise<SqlDriverAdapter> {
    const shadow = await PGlite.create()
    return new PGliteAdapter(shadow, this.#options, () => shadow.close())
  }
}
