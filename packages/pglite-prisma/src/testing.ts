/**
 * Per-test databases: a template instance kept untouched, and memory-level
 * copies of it (`db.clone()`) for the tests. A reset closes the old copy and
 * restores the template into its engine module: a few milliseconds.
 */
import { createHash } from 'node:crypto'
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PGlite, type PGliteOptions } from '@pgwasm/pglite'
import { PrismaPGlite, type PrismaPGliteOptions } from './adapter.js'
import { prismaOptions } from './types.js'
import { applyMigrations, diffSchema } from './migrate.js'
import { readMigrations } from './migrations-folder.js'

/**
 * A kept copy of a database's state, to start fresh copies from. The copy
 * is an instance of its own: later changes to the source do not reach it.
 */
export class DatabaseSnapshot {
  readonly #restore: () => Promise<PGlite>
  readonly #close: () => Promise<void>

  private constructor(restore: () => Promise<PGlite>, close: () => Promise<void>) {
    this.#restore = restore
    this.#close = close
  }

  /**
   * Keeps a copy of `db` as it is now. `db` must not be inside a
   * transaction (an open one would be copied half-done).
   */
  static async take(db: PGlite): Promise<DatabaseSnapshot> {
    const template = await db.clone()
    return new DatabaseSnapshot(
      () => template.clone(),
      () => template.close(),
    )
  }

  /** A snapshot that restores the state `PGlite.createCached` saved under `key` (no instance is kept). */
  static fromCachedState(restore: () => Promise<PGlite>): DatabaseSnapshot {
    return new DatabaseSnapshot(restore, async () => {})
  }

  /** A new, independent in-memory database with the snapshot's contents. */
  restore(): Promise<PGlite> {
    return this.#restore()
  }

  /** Frees the kept copy. */
  close(): Promise<void> {
    return this.#close()
  }
}

/** Keeps a copy of `db` as it is now; see {@link DatabaseSnapshot}. */
export function snapshot(db: PGlite): Promise<DatabaseSnapshot> {
  return DatabaseSnapshot.take(db)
}

/** Options of {@link TestDatabase.create}. */
export interface TestDatabaseOptions {
  /**
   * A Prisma schema to create the tables from. Its SQL is made once by the
   * schema engine and cached on disk by the schema's hash; the database it
   * makes is saved by `PGlite.createCached` under that hash, so later test
   * files (and runs) restore it without the engine or the SQL.
   */
  schema?: string
  /** A migrations folder to apply instead of `schema` (writes `_prisma_migrations`, as `migrate deploy`). */
  migrationsDir?: string
  /** Runs after the schema, before the first snapshot: seed data, extensions, raw SQL. */
  setup?: (db: PGlite) => Promise<void>
  /**
   * Options of the template instance (copies share them), laid over
   * {@link prismaOptions} (the adapter's fast path: Prisma-ready parsers,
   * generic plans).
   */
  pglite?: PGliteOptions
  /** Options of {@link TestDatabase.adapter}. */
  adapter?: PrismaPGliteOptions
  /** Where the schema's SQL is cached; `false`: no disk cache. Default: a folder in the OS temp directory. */
  cacheDir?: string | false
  /**
   * Make the next copy in the background after each reset, so that a reset
   * is a swap. Default false: the copy needs a second engine module, made,
   * mapped and first restored into on the process's one thread, and its
   * memory, while the copy's restore takes as much CPU as the reset's own;
   * test files run as new processes (vitest, Jest) finished ~80 ms later
   * per file with it. It pays when tests leave the thread idle (waiting on
   * the network or timers).
   */
  prepareNext?: boolean
}

const schemaSql = new Map<string, Promise<string>>()

/** The SQL that creates `schema` on an empty database, from memory, the disk cache or the engine. */
function sqlForSchema(schema: string, cacheDir: string | false): Promise<string> {
  const key = createHash('sha256').update(schema).digest('hex')
  let sql = schemaSql.get(key)
  if (!sql) {
    sql = (async () => {
      const file = cacheDir === false ? undefined : join(cacheDir, `${key}.sql`)
      if (file) {
        try {
          return await readFile(file, 'utf8')
        } catch {
          // Not cached yet.
        }
      }
      const made = await diffSchema({ to: { schema } })
      if (file && cacheDir !== false) {
        await mkdir(cacheDir, { recursive: true })
        // Write then rename: parallel test workers never read half a file.
        const partial = `${file}.${process.pid}.${Date.now()}.tmp`
        await writeFile(partial, made)
        await rename(partial, file)
      }
      return made
    })()
    sql.catch(() => schemaSql.delete(key))
    schemaSql.set(key, sql)
  }
  return sql
}

/** Bump when what a saved schema state holds changes. */
const STATE_FORMAT = 1

/** Names the state the schema or the migrations (their contents, not their folder) make on an empty database. */
async function schemaStateKey(options: TestDatabaseOptions): Promise<string> {
  const hash = createHash('sha256').update(`pglite-prisma test state ${STATE_FORMAT}\n`)
  if (options.schema !== undefined) hash.update(`schema\n${options.schema}`)
  if (options.migrationsDir !== undefined) {
    const { migrationDirectories, lockfile } = await readMigrations(options.migrationsDir)
    hash.update(`migrations\n${JSON.stringify([lockfile.content, migrationDirectories.map((m) => [m.path, m.migrationFile])])}`)
  }
  return `pglite-prisma:${hash.digest('hex')}`
}

/**
 * A database for tests whose contents go back to a snapshot on
 * {@link reset}, with a Prisma adapter that follows the resets.
 *
 * @example
 * ```ts
 * const testDb = await TestDatabase.create({ schema })
 * const prisma = new PrismaClient({ adapter: testDb.adapter })
 * beforeEach(() => testDb.reset())
 * afterAll(async () => { await prisma.$disconnect(); await testDb.close() })
 * ```
 */
export class TestDatabase {
  /** The adapter for `new PrismaClient({ adapter })`: its queries go to the current {@link db}. */
  readonly adapter: PrismaPGlite
  #template: DatabaseSnapshot
  #current: PGlite
  #next: Promise<PGlite> | undefined
  /** Whether {@link #next} has its copy (else it waits for an engine module). */
  #nextMade = false
  /** Work a reset left for after it returned. */
  #background: Promise<void> = Promise.resolve()
  readonly #prepareNext: boolean
  readonly #closing = new Set<Promise<void>>()
  #closed = false

  private constructor(template: DatabaseSnapshot, current: PGlite, options: TestDatabaseOptions) {
    this.#template = template
    this.#current = current
    this.#prepareNext = options.prepareNext ?? false
    this.adapter = new PrismaPGlite(() => this.#current, options.adapter)
    this.#makeNext()
  }

  /** Creates the template (schema or migrations, then `setup`) and the first copy. */
  static async create(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
    if (options.schema !== undefined && options.migrationsDir !== undefined) {
      throw new TypeError('pass `schema` or `migrationsDir`, not both')
    }
    const cacheDir = options.cacheDir ?? join(tmpdir(), 'pgwasm-prisma-cache')
    const { schema, migrationsDir } = options
    const pgliteOptions: PGliteOptions = {
      ...prismaOptions,
      ...options.pglite,
      parsers: { ...prismaOptions.parsers, ...options.pglite?.parsers },
    }
    // The schema's tables are a state saved by the core, keyed by what made
    // them: a later test file (a new process) restores it instead of
    // starting Postgres and running the schema's SQL.
    const stateKey = await schemaStateKey(options)
    const makeSchema = async (db: PGlite): Promise<void> => {
      if (schema !== undefined) {
        await db.exec(await sqlForSchema(schema, cacheDir))
        await db.refreshArrayTypes()
      }
      if (migrationsDir !== undefined) await applyMigrations(db, { migrationsDir })
    }
    const fromState = (): Promise<PGlite> => PGlite.createCached(stateKey, makeSchema, pgliteOptions)
    const db = await fromState()
    try {
      if (!options.setup) return new TestDatabase(DatabaseSnapshot.fromCachedState(fromState), db, options)
      await options.setup(db)
      const template = await DatabaseSnapshot.take(db)
      return new TestDatabase(template, db, options)
    } catch (error) {
      await db.close()
      throw error
    }
  }

  /** The database the tests use now; a reset replaces it. */
  get db(): PGlite {
    return this.#current
  }

  /**
   * Replaces {@link db} with a fresh copy of the snapshot. Call it between
   * tests, with no Prisma transaction open. The old instance is closed
   * (with `prepareNext`, in the background after a swap).
   */
  async reset(): Promise<void> {
    this.#check()
    await this.#background
    const old = this.#current
    // No next copy made yet (the first resets of a process, or
    // `prepareNext: false`): the old copy closes first and its engine module
    // serves the next one, a restore of ~10 ms instead of a new module's ~100 ms.
    const closedFirst = !(this.#next !== undefined && this.#nextMade)
    if (closedFirst) await old.close().catch(() => {})
    const next = this.#next ? await this.#next : await this.#template.restore()
    this.#next = undefined
    this.#current = next
    // Closing the old copy and starting the next one each block for a few
    // milliseconds (a checkpoint, a memory copy): after this call returns.
    this.#background = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      // Closed before the next copy is asked for, so that copy gets its module at once.
      if (!closedFirst) await this.#retire(old)
      this.#makeNext()
    })
  }

  /**
   * With `prepareNext`, resolves when the copy for the next {@link reset}
   * is made, so that the reset is a swap (the copy is made in the
   * background after each reset). Without it, at once.
   */
  async ready(): Promise<void> {
    await this.#background
    await this.#next?.catch(() => {})
  }

  /** Makes the current contents what {@link reset} returns to (after seeding in a `beforeAll`, say). */
  async snapshot(): Promise<void> {
    this.#check()
    await this.#background
    const template = await DatabaseSnapshot.take(this.#current)
    const old = this.#template
    this.#template = template
    await this.#discardNext()
    this.#makeNext()
    await old.close()
  }

  /** Closes every instance. */
  async close(): Promise<void> {
    if (this.#closed) return
    await this.#background
    this.#closed = true
    await this.#discardNext()
    this.#retire(this.#current)
    await Promise.all([...this.#closing, this.#template.close()])
  }

  #check(): void {
    if (this.#closed) throw new Error('the TestDatabase is closed')
  }

  #makeNext(): void {
    if (!this.#prepareNext || this.#closed) return
    const next = this.#template.restore()
    this.#nextMade = false
    next.then(
      () => {
        if (this.#next === next) this.#nextMade = true
      },
      // A failed background copy is made again, and reported, by the next reset.
      () => {
        if (this.#next === next) this.#next = undefined
      },
    )
    this.#next = next
  }

  async #discardNext(): Promise<void> {
    const next = this.#next
    this.#next = undefined
    if (next) await next.then((db) => db.close(), () => {})
  }

  #retire(db: PGlite): Promise<void> {
    const closing = db.close().catch(() => {})
    this.#closing.add(closing)
    void closing.finally(() => this.#closing.delete(closing))
    return closing
  }
}
