/**
 * `prisma migrate status` and `prisma migrate reset` with no native binary.
 */
import type { PGlite } from '@pgwasm/pglite'
import { applyMigrations } from './migrate.js'
import { readMigrations } from './migrations-folder.js'
import { engineErrorOf } from './schema-engine-errors.js'
import { NO_FILTER, withEngine } from './schema-engine.js'

/** Options of {@link migrationStatus} and {@link resetDatabase}. */
export interface MigrationsDirOptions {
  /** The migrations folder (`prisma/migrations`). */
  migrationsDir: string
}

/** How a database's migration history compares with a migrations folder. */
export interface MigrationStatus {
  /** The migrations of the folder, in order. */
  readonly migrationNames: readonly string[]
  /** Whether the database has a `_prisma_migrations` table (false: never migrated, or not by Prisma). */
  readonly hasMigrationsTable: boolean
  /** Migrations of the folder the database has not had. */
  readonly unappliedMigrationNames: readonly string[]
  /** Migrations the database had that the folder does not hold. */
  readonly unpersistedMigrationNames: readonly string[]
  /** Migrations recorded as failed (needing `prisma migrate resolve`). */
  readonly failedMigrationNames: readonly string[]
  /** Applied migrations whose `migration.sql` changed since (their checksum differs). */
  readonly editedMigrationNames: readonly string[]
  /** True when every migration is applied, none failed, none was edited and the database has none the folder lacks. */
  readonly isUpToDate: boolean
}

/**
 * Compares the database's `_prisma_migrations` with a migrations folder, as
 * `prisma migrate status` does (read-only).
 * @throws {SchemaEngineError} when the engine fails.
 */
export async function migrationStatus(db: PGlite, options: MigrationsDirOptions): Promise<MigrationStatus> {
  const list = await readMigrations(options.migrationsDir)
  // Read-only, and outside a transaction: the engine's probe of a missing
  // `_prisma_migrations` fails, which would abort a held transaction.
  const output = await withEngine(db, undefined, (engine) =>
    engine.diagnoseMigrationHistory({ migrationsList: list, optInToShadowDatabase: false, filters: NO_FILTER }).catch((error: unknown) => Promise.reject(engineErrorOf(error))),
  )
  const history = output.history
  const unapplied = history && history.diagnostic !== 'migrationsDirectoryIsBehind' ? history.unappliedMigrationNames : []
  const unpersisted = history && history.diagnostic !== 'databaseIsBehind' ? history.unpersistedMigrationNames : []
  return {
    migrationNames: list.migrationDirectories.map((m) => m.path),
    hasMigrationsTable: output.hasMigrationsTable,
    unappliedMigrationNames: unapplied,
    unpersistedMigrationNames: unpersisted,
    failedMigrationNames: output.failedMigrationNames,
    editedMigrationNames: output.editedMigrationNames,
    isUpToDate: history === null && output.failedMigrationNames.length === 0 && output.editedMigrationNames.length === 0,
  }
}

/**
 * Drops everything in the database's schema (tables, data, types,
 * `_prisma_migrations`) and applies every migration of the folder, as
 * `prisma migrate reset --force` does. All data is lost. The drop runs
 * outside a transaction (inside one, a statement of the engine's reset fails
 * and aborts it); each migration then applies in its own.
 * @returns the migrations applied, in order.
 * @throws {SchemaEngineError} when the engine cannot reset the database.
 * @throws {MigrationError} when a migration fails (the migrations before it stay applied).
 */
export async function resetDatabase(db: PGlite, options: MigrationsDirOptions): Promise<{ appliedMigrationNames: string[] }> {
  await withEngine(db, undefined, (engine) => engine.reset({ filter: NO_FILTER }).catch((error: unknown) => Promise.reject(engineErrorOf(error))))
  return applyMigrations(db, options)
}
