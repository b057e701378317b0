/**
 * Schema push, migrations and diffs with no native binary: Prisma's schema
 * engine compiled to WebAssembly (`@prisma/schema-engine-wasm`), talking to
 * the database through this package's adapter.
 *
 * Everything the engine does to a database runs inside one transaction that
 * this module holds (one per migration for {@link applyMigrations}): a push
 * or a migration that fails leaves the database as it was.
 */
import { stat } from 'node:fs/promises'
import { PGlite } from '@pgwasm/pglite'
import type * as Wasm from '@prisma/schema-engine-wasm'
import { appliedMigrations, readMigrations } from './migrations-folder.js'
import { MigrationError, SchemaEngineError, engineErrorOf } from './schema-engine-errors.js'
import type { HeldSession } from './engine-session.js'
import { NO_FILTER, SCHEMA_PATH, atomically, withEngine } from './schema-engine.js'

export { MigrationError, SchemaEngineError } from './schema-engine-errors.js'

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
  if (list.migrationDirectories.every((m) => applied.has(m.path))) return { appliedMigrationNames: [] }
  const appliedMigrationNames = await withEngine(db, undefined, (engine, session) => applyPending(engine, session, list, applied))
  return { appliedMigrationNames }
}

/**
 * Applies the migrations of `list` not in `applied`, one engine call and one
 * transaction each (the engine is given the folder up to that migration).
 * @returns their names, in order.
 */
export async function applyPending(engine: Wasm.SchemaEngine, session: HeldSession, list: Wasm.MigrationList, applied: ReadonlySet<string>): Promise<string[]> {
  const names: string[] = []
  for (let i = 0; i < list.migrationDirectories.length; i++) {
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
  // Enum types created just now have array types the instance does not parse yet.
  if (names.length > 0) await session.db.refreshArrayTypes()
  return names
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
