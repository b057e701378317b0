/**
 * The errors of schema work: the engine's own, and a migration that failed.
 */
import type { DatabaseError } from '@pgwasm/pglite'

/** A failure of the schema engine (a push it refused, a history it rejects), or of a migration. */
export class SchemaEngineError extends Error {
  override name = 'SchemaEngineError'
  /** Prisma's error code when the engine gave one (e.g. `P3005`); `DRIFT` for a {@link MigrationDriftError}. */
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
export function engineErrorOf(error: unknown): SchemaEngineError {
  if (error instanceof SchemaEngineError) return error
  const fields = (typeof error === 'object' && error !== null ? error : {}) as { message?: unknown; code?: unknown; error_code?: unknown }
  const message = typeof fields.message === 'string' ? fields.message : String(error)
  const code = typeof fields.error_code === 'string' ? fields.error_code : typeof fields.code === 'string' ? fields.code : undefined
  return new SchemaEngineError(message, { code, cause: error })
}

/**
 * `migrateDev` found that the database cannot take a new migration without
 * a reset: its schema drifted from the migrations, or a migration it applied
 * was edited since (its checksum differs), or its history diverges from the
 * folder. Nothing was changed. {@link reason} is the schema engine's
 * explanation, as `prisma migrate dev` prints it.
 */
export class MigrationDriftError extends SchemaEngineError {
  override name = 'MigrationDriftError'
  /** Why the database needs a reset, in the schema engine's words. */
  readonly reason: string

  constructor(reason: string) {
    super(
      `${reason}\nWe need to reset the database schema; nothing was changed. ` +
        'Run `pgwasm-prisma migrate reset --force` (or `resetDatabase()`) to drop it and apply every migration again. All data will be lost.',
      { code: 'DRIFT' },
    )
    this.reason = reason
  }
}
