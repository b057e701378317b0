/**
 * Schema push, migrations and diffs with no native binary: Prisma's schema
 * engine compiled to WebAssembly (`@prisma/schema-engine-wasm`), talking to
 * the database through this package's adapter.
 *
 * Everything the engine does to a database runs inside one transaction that
 * this module holds (one per migration for {@link applyMigrations}): a push
 * or a migration that fails leaves the database as it was.
 */
import { readFile, readdir, stat } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import {
  bindMigrationAwareSqlAdapterFactory,
  type IsolationLevel,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
  type SqlQuery,
  type SqlResultSet,
  type Transaction,
} from '@prisma/driver-adapter-utils'
import { DatabaseError, PGlite, type Transaction as PGliteTx } from '@pgwasm/pglite'
import type * as Wasm from '@prisma/schema-engine-wasm'
import { toAdapterError } from './errors.js'
import { ADAPTER_NAME, PGliteQueryable, type QueryTarget } from './queryable.js'
import { statementAt, splitStatements } from './sql-split.js'

type SchemaEngineModule = typeof Wasm

let engineModule: Promise<SchemaEngineModule> | undefined

/**
 * Loads the engine once per process. Its package's entry imports the .wasm
 * file as an ES module, which Node 20 refuses without
 * `--experimental-wasm-modules`; so the bindings module is imported and the
 * bytes instantiated here, which works on every Node version.
 */
function loadEngine(): Promise<SchemaEngineModule> {
  engineModule ??= (async () => {
    const require = createRequire(import.meta.url)
    const bindingsPath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg')
    const bindings = (await import(pathToFileURL(bindingsPath).href)) as SchemaEngineModule & {
      __wbg_set_wasm(exports: WebAssembly.Exports): void
    }
    installPanicRegistry()
    const bytes = await readFile(join(dirname(bindingsPath), 'schema_engine_bg.wasm'))
    const { instance } = await WebAssembly.instantiate(bytes, { './schema_engine_bg.js': withUnrefTimers(bindings) })
    bindings.__wbg_set_wasm(instance.exports)
    ;(instance.exports.__wbindgen_start as () => void)()
    return bindings
  })()
  engineModule.catch(() => {
    engineModule = undefined
  })
  return engineModule
}

/**
 * The engine's imports with its timers unref'd: it arms timeouts (up to a
 * minute) that are cleared or moot once a command finished, and a live timer
 * would keep the process from exiting until it fires.
 */
function withUnrefTimers(bindings: object): WebAssembly.ModuleImports {
  const imports: WebAssembly.ModuleImports = { ...(bindings as WebAssembly.ModuleImports) }
  for (const name of Object.keys(imports)) {
    if (!name.startsWith('__wbg_setTimeout_')) continue
    const arm = imports[name] as (callback: () => void, ms: number) => unknown
    imports[name] = (callback: () => void, ms: number) => {
      const timer = arm(callback, ms)
      ;(timer as { unref?: () => void } | undefined)?.unref?.()
      return timer
    }
  }
  return imports
}

interface PanicRegistry {
  get(): string
  set_message(message: string): void
}

/** The engine reports a Rust panic's message through this global before trapping. */
function installPanicRegistry(): void {
  const global = globalThis as { PRISMA_WASM_PANIC_REGISTRY?: PanicRegistry }
  if (global.PRISMA_WASM_PANIC_REGISTRY) return
  let message = ''
  global.PRISMA_WASM_PANIC_REGISTRY = {
    get: () => message,
    set_message: (m: string) => {
      message = `RuntimeError: ${m}`
    },
  }
}

/** A failure of the schema engine (a push it refused, a history it rejects), or of a migration. */
export class SchemaEngineError extends Error {
  override name = 'SchemaEngineError'
  /** Prisma's error code when the engine gave one (e.g. `P3005`). */
  readonly code: string | undefined
  constructor(message: string, options: { code?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause })
    this.code = options.code
  }
}

/** A migration failed; it was rolled back, so the database is as it was before it. */
export class MigrationError extends SchemaEngineError {
  override name = 'MigrationError'
  /** The migration's folder name. */
  readonly migrationName: string
  /** The statement of `migration.sql` that failed, when it is known. */
  readonly statement: string | undefined
  /** PostgreSQL's error, when a statement failed. */
  readonly databaseError: DatabaseError | undefined

  constructor(migrationName: string, detail: { statement?: string; databaseError?: DatabaseError; cause?: unknown; message?: string }) {
    const reason = detail.databaseError
      ? `${detail.databaseError.message} (SQLSTATE ${detail.databaseError.code})`
      : (detail.message ?? 'the schema engine reported an error')
    const where = detail.statement ? `\nFailing statement:\n${indent(detail.statement)}` : ''
    super(`Migration \`${migrationName}\` failed: ${reason}${where}\nIt was rolled back: the database is as it was before it.`, {
      code: 'P3018',
      cause: detail.cause ?? detail.databaseError,
    })
    this.migrationName = migrationName
    this.statement = detail.statement
    this.databaseError = detail.databaseError
  }
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n')
}

/** What the engine's errors carry besides a message. */
function engineErrorOf(error: unknown): SchemaEngineError {
  if (error instanceof SchemaEngineError) return error
  const fields = (typeof error === 'object' && error !== null ? error : {}) as { message?: unknown; code?: unknown; error_code?: unknown }
  const message = typeof fields.message === 'string' ? fields.message : String(error)
  const code = typeof fields.error_code === 'string' ? fields.error_code : typeof fields.code === 'string' ? fields.code : undefined
  return new SchemaEngineError(message, { code, cause: error })
}

/** A script that failed inside the held transaction: the error and the statement it came from. */
interface ScriptFailure {
  readonly error: DatabaseError
  readonly statement: string | undefined
}

/**
 * Where the engine's queries go: one transaction held on the database
 * while a command runs, so the command applies whole or not at all.
 */
class HeldSession {
  #tx: PGliteTx | undefined
  #finish: ((commit: boolean) => void) | undefined
  #done: Promise<void> | undefined
  #savepoints = 0
  lastFailure: ScriptFailure | undefined

  constructor(readonly db: PGlite) {}

  /** The open transaction, or the database itself between commands. */
  get target(): QueryTarget & Pick<PGliteTx, 'exec'> {
    return this.#tx ?? this.db
  }

  async begin(): Promise<void> {
    this.lastFailure = undefined
    await new Promise<void>((started, failed) => {
      const outcome = new Promise<boolean>((settle) => {
        this.#finish = settle
      })
      this.#done = this.db.transaction(async (tx) => {
        this.#tx = tx
        started()
        if (!(await outcome)) await tx.rollback()
      })
      this.#done.catch(failed)
    })
  }

  /** Commits (or rolls back) what the command did. */
  async end(commit: boolean): Promise<void> {
    const done = this.#done
    this.#finish?.(commit)
    this.#tx = undefined
    this.#finish = undefined
    this.#done = undefined
    await done
  }

  nextSavepoint(): string {
    return `pgwasm_engine_${++this.#savepoints}`
  }

  /**
   * Runs a script under a savepoint: a failure is rolled back to it, so the
   * engine can still record the failure before the whole command is undone.
   */
  async runScript(script: string): Promise<void> {
    const target = this.target
    if (!this.#tx) {
      await target.exec(script)
      return
    }
    const savepoint = this.nextSavepoint()
    await target.exec(`SAVEPOINT ${savepoint}`)
    try {
      await target.exec(script)
      await target.exec(`RELEASE SAVEPOINT ${savepoint}`)
    } catch (error) {
      await target.exec(`ROLLBACK TO SAVEPOINT ${savepoint}`)
      if (error instanceof DatabaseError) this.lastFailure = { error, statement: await this.#failingStatement(script, error, savepoint) }
      throw error
    }
  }

  /**
   * The statement of `script` that failed: the one holding the error's
   * position when the server gave one; otherwise found by running the
   * statements one by one (undone afterwards).
   */
  async #failingStatement(script: string, error: DatabaseError, savepoint: string): Promise<string | undefined> {
    const position = error.position ? Number.parseInt(error.position, 10) - 1 : NaN
    if (Number.isFinite(position)) return statementAt(script, position)?.text
    const statements = splitStatements(script)
    if (statements.length === 1) return statements[0]!.text
    const target = this.target
    let failing: string | undefined
    for (const statement of statements) {
      try {
        await target.exec(statement.text)
      } catch {
        failing = statement.text
        break
      }
    }
    await target.exec(`ROLLBACK TO SAVEPOINT ${savepoint}`)
    return failing
  }
}

/** PostgreSQL 18 lists NOT NULL constraints in pg_constraint (contype 'n'); this engine build panics on them. */
const NOT_NULL_CONSTRAINT = 'n'

/** The engine's connection: queries into the held session, with PostgreSQL 18's catalog made readable for it. */
class EngineAdapter extends PGliteQueryable implements SqlDriverAdapter {
  readonly #session: HeldSession
  readonly #onDispose: (() => Promise<void>) | undefined

  constructor(session: HeldSession, onDispose?: () => Promise<void>) {
    super(() => session.target, () => session.db.parsers)
    this.#session = session
    this.#onDispose = onDispose
  }

  override async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    const result = await super.queryRaw(query)
    // The engine's constraint query keeps every contype but p, u and f; NOT
    // NULL constraints are columns' nullability, which it reads elsewhere.
    const column = result.columnNames.indexOf('constraint_type')
    if (column >= 0) result.rows = result.rows.filter((row) => row[column] !== NOT_NULL_CONSTRAINT)
    return result
  }

  async executeScript(script: string): Promise<void> {
    try {
      await this.#session.runScript(script)
    } catch (error) {
      throw toAdapterError(error)
    }
  }

  async startTransaction(_isolationLevel?: IsolationLevel): Promise<Transaction> {
    return new SavepointTransaction(this.#session)
  }

  getConnectionInfo(): { supportsRelationJoins: boolean } {
    return { supportsRelationJoins: true }
  }

  async dispose(): Promise<void> {
    await this.#onDispose?.()
  }
}

/** A transaction of the engine inside the held one: a savepoint. */
class SavepointTransaction extends PGliteQueryable implements Transaction {
  readonly options = { usePhantomQuery: true }
  readonly #session: HeldSession
  readonly #name: string
  readonly #begun: Promise<unknown>

  constructor(session: HeldSession) {
    super(() => session.target, () => session.db.parsers)
    this.#session = session
    this.#name = session.nextSavepoint()
    this.#begun = session.target.exec(`SAVEPOINT ${this.#name}`)
  }

  override async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    await this.#begun
    return super.queryRaw(query)
  }

  override async executeRaw(query: SqlQuery): Promise<number> {
    await this.#begun
    return super.executeRaw(query)
  }

  async commit(): Promise<void> {
    await this.#begun
    await this.#session.target.exec(`RELEASE SAVEPOINT ${this.#name}`)
  }

  async rollback(): Promise<void> {
    await this.#begun
    await this.#session.target.exec(`ROLLBACK TO SAVEPOINT ${this.#name}`)
    await this.#session.target.exec(`RELEASE SAVEPOINT ${this.#name}`)
  }
}

/** The factory the engine is given: its connection is the held session; its shadow database a fresh in-memory one. */
function engineFactory(session: HeldSession): SqlMigrationAwareDriverAdapterFactory {
  return {
    provider: 'postgres',
    adapterName: ADAPTER_NAME,
    connect: async () => new EngineAdapter(session),
    connectToShadowDb: async () => {
      const shadow = await PGlite.create()
      return new EngineAdapter(new HeldSession(shadow), () => shadow.close())
    },
  }
}

const NO_FILTER = { externalTables: [], externalEnums: [] }
const SCHEMA_PATH = 'schema.prisma'

/** Runs `command` with an engine connected to `db`; the engine is freed afterwards. */
async function withEngine<T>(db: PGlite, schema: string | undefined, command: (engine: Wasm.SchemaEngine, session: HeldSession) => Promise<T>): Promise<T> {
  const { SchemaEngine } = await loadEngine()
  const session = new HeldSession(db)
  const options = { datamodels: schema === undefined ? undefined : ([[SCHEMA_PATH, schema]] as [string, string][]) }
  let engine: Wasm.SchemaEngine
  try {
    engine = await SchemaEngine.new(options, () => {}, bindMigrationAwareSqlAdapterFactory(engineFactory(session)))
  } catch (error) {
    throw engineErrorOf(error)
  }
  try {
    return await command(engine, session)
  } finally {
    engine.free()
  }
}

/** Runs one engine command inside a held transaction: committed if it succeeds, rolled back if it throws. */
async function atomically<T>(session: HeldSession, command: () => Promise<T>): Promise<T> {
  await session.begin()
  let result: T
  try {
    result = await command()
  } catch (error) {
    await session.end(false)
    throw error
  }
  await session.end(true)
  return result
}

/** Options of {@link pushSchema}. */
export interface PushSchemaOptions {
  /** The Prisma schema's text (all models in one file). */
  schema: string
  /** Apply changes that lose data (dropping a column or table), as `db push --accept-data-loss`. Default false. */
  acceptDataLoss?: boolean
}

/** What {@link pushSchema} did. */
export interface PushSchemaResult {
  /** How many migration steps ran (0: the database already matched). */
  executedSteps: number
  /** The data-loss warnings of the changes (applied only with `acceptDataLoss`). */
  warnings: string[]
}

/**
 * Makes the database match a Prisma schema, as `prisma db push` does, with
 * no native binary. Runs as one transaction: on failure nothing changed.
 * @throws {SchemaEngineError} when the change would lose data (without
 *   `acceptDataLoss`), cannot run, or the engine fails.
 */
export async function pushSchema(db: PGlite, options: PushSchemaOptions): Promise<PushSchemaResult> {
  const result = await withEngine(db, options.schema, (engine, session) =>
    atomically(session, async () => {
      let output: Wasm.SchemaPushOutput
      try {
        output = await engine.schemaPush({
          force: options.acceptDataLoss ?? false,
          schema: { files: [{ path: SCHEMA_PATH, content: options.schema }] },
          filters: NO_FILTER,
        })
      } catch (error) {
        throw engineErrorOf(error)
      }
      if (output.unexecutable.length > 0) {
        throw new SchemaEngineError(`The schema cannot be pushed:\n${output.unexecutable.map((u) => `  • ${u}`).join('\n')}`)
      }
      if (output.warnings.length > 0 && !options.acceptDataLoss) {
        throw new SchemaEngineError(
          `The push would lose data; nothing was changed. Pass acceptDataLoss: true to apply it:\n${output.warnings.map((w) => `  • ${w}`).join('\n')}`,
        )
      }
      return { executedSteps: output.executedSteps, warnings: output.warnings }
    }),
  )
  // Enum types created just now have array types the instance does not parse yet.
  if (result.executedSteps > 0) await db.refreshArrayTypes()
  return result
}

/** Options of {@link applyMigrations}. */
export interface ApplyMigrationsOptions {
  /** The migrations folder (`prisma/migrations`): one folder per migration holding `migration.sql`. */
  migrationsDir: string
}

/** What {@link applyMigrations} did. */
export interface ApplyMigrationsResult {
  /** The migrations applied by this call, in order (empty: all were applied already). */
  appliedMigrationNames: string[]
}

/** A migrations folder as the engine takes it. */
async function readMigrations(migrationsDir: string): Promise<Wasm.MigrationList> {
  const baseDir = resolve(migrationsDir)
  const entries = await readdir(baseDir, { withFileTypes: true })
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort()
  const migrationDirectories: Wasm.MigrationDirectory[] = []
  for (const name of names) {
    const file = join(baseDir, name, 'migration.sql')
    let content: Wasm.JsResult<string, string>
    try {
      content = { tag: 'ok', value: await readFile(file, 'utf8') }
    } catch (error) {
      // A folder without migration.sql is not a migration (Prisma skips it too).
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
      content = { tag: 'error', value: String(error) }
    }
    migrationDirectories.push({ path: name, migrationFile: { path: 'migration.sql', content } })
  }
  let lockContent: string | null = null
  try {
    lockContent = await readFile(join(baseDir, 'migration_lock.toml'), 'utf8')
  } catch {
    // No lock file: the engine accepts that.
  }
  return { baseDir, lockfile: { path: 'migration_lock.toml', content: lockContent }, shadowDbInitScript: '', migrationDirectories }
}

/** Names of the migrations recorded as applied (none when the table does not exist yet). */
async function appliedMigrations(db: PGlite): Promise<Set<string>> {
  const { rows } = await db.query<[string | null]>(`SELECT to_regclass('_prisma_migrations')::text`, [], { rowMode: 'array' })
  if (!rows[0]?.[0]) return new Set()
  const applied = await db.query<[string]>(
    'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
    [],
    { rowMode: 'array' },
  )
  return new Set(applied.rows.map((r) => r[0]))
}

/**
 * Applies the migrations of a folder that the database has not had yet, as
 * `prisma migrate deploy` does: same SQL, same `_prisma_migrations` rows, so
 * the Prisma CLI accepts the database later (a real server restored from a
 * dump, say). Each migration runs in its own transaction together with its
 * history row: if one fails, it leaves no trace (not even a failed row) and
 * the migrations before it stay applied. Applying again is a no-op.
 * @throws {MigrationError} naming the migration and the failing statement.
 * @throws {SchemaEngineError} when the history does not fit the folder.
 */
export async function applyMigrations(db: PGlite, options: ApplyMigrationsOptions): Promise<ApplyMigrationsResult> {
  const list = await readMigrations(options.migrationsDir)
  const applied = await appliedMigrations(db)
  const pending = list.migrationDirectories.findIndex((m) => !applied.has(m.path))
  if (pending < 0) return { appliedMigrationNames: [] }
  const appliedMigrationNames = await withEngine(db, undefined, async (engine, session) => {
    const names: string[] = []
    // One engine call per migration, each given the folder up to that
    // migration, so each runs in a transaction of its own.
    for (let i = pending; i < list.migrationDirectories.length; i++) {
      const migration = list.migrationDirectories[i]!
      if (applied.has(migration.path)) continue
      const prefix = { ...list, migrationDirectories: list.migrationDirectories.slice(0, i + 1) }
      const output = await atomically(session, async () => {
        try {
          return await engine.applyMigrations({ migrationsList: prefix, filters: NO_FILTER })
        } catch (error) {
          const failure = session.lastFailure
          if (failure) throw new MigrationError(migration.path, { statement: failure.statement, databaseError: failure.error, cause: error })
          const engineError = engineErrorOf(error)
          if (engineError.code === 'P3018' || engineError.code === undefined) {
            throw new MigrationError(migration.path, { message: engineError.message, cause: error })
          }
          throw engineError
        }
      })
      names.push(...output.appliedMigrationNames)
    }
    return names
  })
  if (appliedMigrationNames.length > 0) await db.refreshArrayTypes()
  return { appliedMigrationNames }
}

/** A schema to diff: a Prisma schema's text, a migrations folder, a live database, or nothing. */
export type SchemaSource = { schema: string } | { migrationsDir: string } | { db: PGlite } | { empty: true }

/** Options of {@link diffSchema}. */
export interface DiffSchemaOptions {
  /** Where to start from. Default: an empty database. */
  from?: SchemaSource
  /** The state to reach. */
  to: SchemaSource
}

const DATASOURCE_ONLY = 'datasource db {\n  provider = "postgresql"\n}\n'

async function diffTarget(source: SchemaSource): Promise<Wasm.DiffTarget> {
  if ('schema' in source) return { tag: 'schemaDatamodel', files: [{ path: SCHEMA_PATH, content: source.schema }] }
  if ('migrationsDir' in source) {
    if (!(await stat(source.migrationsDir)).isDirectory()) throw new SchemaEngineError(`${source.migrationsDir} is not a folder`)
    return { tag: 'migrations', ...(await readMigrations(source.migrationsDir)) }
  }
  if ('db' in source) return { tag: 'schemaDatasource', files: [{ path: SCHEMA_PATH, content: DATASOURCE_ONLY }], configDir: process.cwd() }
  return { tag: 'empty' }
}

/**
 * The SQL that takes a database from one schema to another, as
 * `prisma migrate diff --script`: write it to `migrations/<name>/migration.sql`
 * to make a migration. A migrations folder is replayed on a scratch
 * in-memory database (the engine's shadow database).
 * @returns the script; empty when the two match.
 */
export async function diffSchema(options: DiffSchemaOptions): Promise<string> {
  const from = options.from ?? { empty: true }
  const live = 'db' in from ? from.db : 'db' in options.to ? options.to.db : undefined
  if (live && 'db' in from && 'db' in options.to && from.db !== options.to.db) {
    throw new SchemaEngineError('diffSchema compares at most one live database')
  }
  // A diff between files needs no database, but the engine wants a connection.
  const db = live ?? (await PGlite.create())
  try {
    return await withEngine(db, undefined, async (engine) => {
      try {
        // With exitCode set the engine answers 2 when there is a difference;
        // 0 means none (its stdout is then a comment, not a migration).
        const result = await engine.diff({ from: await diffTarget(from), to: await diffTarget(options.to), script: true, exitCode: true, filters: NO_FILTER })
        return result.exitCode === 0 ? '' : (result.stdout ?? '')
      } catch (error) {
        throw engineErrorOf(error)
      }
    })
  } finally {
    if (!live) await db.close()
  }
}
