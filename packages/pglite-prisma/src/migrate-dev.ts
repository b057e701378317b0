/**
 * `prisma migrate dev` with no native binary: diff the schema against the
 * migrations folder, write the new migration and the lock file, apply it.
 */
import type { PGlite } from '@pgwasm/pglite'
import type * as Wasm from '@prisma/schema-engine-wasm'
import { applyPending } from './migrate.js'
import { appliedMigrations, readMigrations, writeMigration } from './migrations-folder.js'
import { MigrationDriftError, SchemaEngineError, engineErrorOf } from './schema-engine-errors.js'
import { NO_FILTER, SCHEMA_PATH, atomically, withEngine } from './schema-engine.js'

/** Options of {@link migrateDev}. */
export interface MigrateDevOptions {
  /** The Prisma schema's text (all models in one file). */
  schema: string
  /** The migrations folder (`prisma/migrations`); created when missing. */
  migrationsDir: string
  /**
   * The new migration's name; its folder is `<UTC timestamp>_<name>`.
   * Needed when the schema has changes (or with `createOnly`).
   */
  name?: string
  /** Write the migration without applying it, to edit it first (`--create-only`). Default false. */
  createOnly?: boolean
  /**
   * Create (and apply) a migration that loses data, such as dropping a
   * column that holds values. Default false: such a migration is refused
   * and nothing is written.
   */
  acceptDataLoss?: boolean
}

/** What {@link migrateDev} did. */
export interface MigrateDevResult {
  /** The folder name of the migration written, or undefined when the schema had no changes. */
  createdMigrationName: string | undefined
  /** The migrations applied by this call, in order: pending ones from the folder, then the new one. */
  appliedMigrationNames: string[]
}

/**
 * A migration name as Prisma's CLI makes one from `--name`: camelCase split,
 * accents dropped, lower case, every run of other characters one `_`, at
 * most 200 characters ("Add userName!" -> `add_user_name`).
 */
export function migrationSlug(name: string): string {
  return name
    .replace(/([a-z\d])([A-Z])/g, '$1_$2')
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z\d]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 200)
}

const TIMESTAMP = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})_/

/**
 * The engine names a migration after the current second, so two made in
 * the same second (a script, a test) could sort before the one they follow;
 * the new one gets the second after the last instead.
 */
function orderedName(generated: string, existing: readonly Wasm.MigrationDirectory[]): string {
  const last = existing.at(-1)?.path
  if (last === undefined || generated > last) return generated
  const parts = TIMESTAMP.exec(last)
  const own = TIMESTAMP.exec(generated)
  if (!parts || !own) return generated
  const [, y, mo, d, h, mi, s] = parts.map(Number) as [number, number, number, number, number, number, number]
  const next = new Date(Date.UTC(y, mo - 1, d, h, mi, s + 1))
  const stamp = next.toISOString().replace(/\D/g, '').slice(0, 14)
  return `${stamp}_${generated.slice(own[0].length)}`
}

/**
 * Brings the database and the migrations folder up to a Prisma schema, as
 * `prisma migrate dev --name <name>` does: applies the folder's pending
 * migrations, writes the schema's changes as a new migration (and
 * `migration_lock.toml`), and applies it. Prisma Client is not regenerated:
 * run `prisma generate` when the models changed.
 * @throws {MigrationDriftError} when the database needs a reset first (its
 *   schema drifted, or an applied migration was edited); nothing changes.
 * @throws {TypeError} when a migration is needed and `name` is missing.
 * @throws {SchemaEngineError} when the change loses data (without
 *   `acceptDataLoss`) or cannot run; nothing is written.
 * @throws {MigrationError} when a migration fails (it is rolled back).
 */
export async function migrateDev(db: PGlite, options: MigrateDevOptions): Promise<MigrateDevResult> {
  const { schema, migrationsDir } = options
  const schemaFiles: Wasm.SchemasContainer = { files: [{ path: SCHEMA_PATH, content: schema }] }
  const list = await readMigrations(migrationsDir)
  // One engine for every step: the schema the folder's migrations make,
  // computed once on a shadow database by devDiagnostic, is cached in the
  // engine, and evaluateDataLoss and createMigration read it from there.
  return withEngine(db, schema, async (engine, session) => {
    // Read-only, and outside a transaction: the engine's probe of a missing
    // `_prisma_migrations` fails, which would abort a held transaction.
    const diagnose = async (): Promise<void> => {
      const diagnostic = await engine.devDiagnostic({ migrationsList: list, filters: NO_FILTER }).catch((error: unknown) => Promise.reject(engineErrorOf(error)))
      if (diagnostic.action.tag === 'reset') throw new MigrationDriftError(diagnostic.action.reason)
    }
    await diagnose()
    const appliedMigrationNames = await applyPending(engine, session, list, await appliedMigrations(db))
    // With migrations pending, the first diagnostic only saw that the
    // database was behind and replayed nothing; the second one replays the
    // folder (and checks the database against it), which fills the cache.
    if (appliedMigrationNames.length > 0) await diagnose()
    const created = await atomically(session, async () => {
      try {
        const loss = await engine.evaluateDataLoss({ migrationsList: list, schema: schemaFiles, filters: NO_FILTER })
        if (loss.unexecutableSteps.length > 0) {
          throw new SchemaEngineError(`The migration cannot run on this database; nothing was written:\n${bullets(loss.unexecutableSteps)}`)
        }
        if (loss.warnings.length > 0 && !options.acceptDataLoss) {
          throw new SchemaEngineError(
            `The migration would lose data; nothing was written. Pass \`acceptDataLoss: true\` (\`--accept-data-loss\`) to create it:\n${bullets(loss.warnings)}`,
          )
        }
        if (loss.migrationSteps === 0 && !options.createOnly) return undefined
        const slug = migrationSlug(options.name ?? '')
        if (!slug) {
          throw new TypeError(
            options.name
              ? `the migration name ${JSON.stringify(options.name)} has no letter or digit to make a folder name from`
              : 'the schema has changes: name the new migration (`name` option, `--name <name>` on the command line)',
          )
        }
        return await engine.createMigration({
          draft: options.createOnly ?? false,
          migrationName: slug,
          migrationsList: list,
          schema: schemaFiles,
          filters: NO_FILTER,
        })
      } catch (error) {
        throw error instanceof TypeError ? error : engineErrorOf(error)
      }
    })
    if (!created || created.migrationScript === null) return { createdMigrationName: undefined, appliedMigrationNames }

    const name = orderedName(created.generatedMigrationName, list.migrationDirectories)
    await writeMigration(migrationsDir, name, created.migrationScript, created.connectorType)
    if (!options.createOnly) {
      const withNew = await readMigrations(migrationsDir)
      appliedMigrationNames.push(...(await applyPending(engine, session, withNew, await appliedMigrations(db))))
    }
    return { createdMigrationName: name, appliedMigrationNames }
  })
}

function bullets(feedback: readonly Wasm.MigrationFeedback[]): string {
  return feedback.map((f) => `  • ${f.message}`).join('\n')
}
