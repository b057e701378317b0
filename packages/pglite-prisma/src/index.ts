export { PrismaPGlite, PGliteAdapter } from './adapter.js'
export type { PrismaPGliteOptions, DatabaseSource } from './adapter.js'
export { PGliteTransaction } from './transaction.js'
export { PGliteQueryable, ADAPTER_NAME } from './queryable.js'
export type { AdapterDatabase, QueryTarget } from './queryable.js'
export { mapDatabaseError, toAdapterError } from './errors.js'
export { columnTypeOf, prismaOptions, prismaParsers, toPrismaValue, toParams } from './types.js'
export type { DbParam } from './types.js'
export { pushSchema, applyMigrations, diffSchema, SchemaEngineError, MigrationError } from './migrate.js'
export { MigrationDriftError } from './schema-engine-errors.js'
export { migrateDev } from './migrate-dev.js'
export type { MigrateDevOptions, MigrateDevResult } from './migrate-dev.js'
export { migrationStatus, resetDatabase } from './migrate-status.js'
export type { MigrationStatus, MigrationsDirOptions } from './migrate-status.js'
export type {
  PushSchemaOptions,
  PushSchemaResult,
  ApplyMigrationsOptions,
  ApplyMigrationsResult,
  DiffSchemaOptions,
  SchemaSource,
} from './migrate.js'
export { TestDatabase, DatabaseSnapshot, snapshot } from './testing.js'
export type { TestDatabaseOptions } from './testing.js'
export { offlineGenerateEnv } from './generate.js'
