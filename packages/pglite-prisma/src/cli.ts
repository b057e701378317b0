#!/usr/bin/env node
/**
 * `pgwasm-prisma migrate dev|deploy|status|reset`: Prisma Migrate's
 * commands on a pgwasm data directory, with no native binary.
 */
import { readFile } from 'node:fs/promises'
import { dirname, join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { PGlite } from '@pgwasm/pglite'
import { applyMigrations } from './migrate.js'
import { migrateDev } from './migrate-dev.js'
import { migrationStatus, resetDatabase } from './migrate-status.js'
import { SchemaEngineError } from './schema-engine-errors.js'

const HELP = `pgwasm-prisma: Prisma Migrate on a pgwasm data directory, no native binary

Usage:
  pgwasm-prisma migrate dev --name <name> --db <dir>   create a migration from schema changes and apply it
  pgwasm-prisma migrate deploy --db <dir>              apply the pending migrations
  pgwasm-prisma migrate status --db <dir>              compare the database with the migrations (exit 1 if behind)
  pgwasm-prisma migrate reset --force --db <dir>       drop everything and apply every migration again

Options:
  --db <dir>               the database's data directory (created when missing)
  --schema <file>          the Prisma schema (default prisma/schema.prisma)
  --migrations <dir>       the migrations folder (default: migrations/ beside the schema)
  -n, --name <name>        dev: the new migration's name
  --create-only            dev: write the migration without applying it
  --accept-data-loss       dev: create a migration that drops data
  -f, --force              reset: confirm that all data will be lost
  --help`

const COMMANDS = ['dev', 'deploy', 'status', 'reset'] as const
type Command = (typeof COMMANDS)[number]

/** A mistake in the command line: printed with the help, exit code 2. */
class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        db: { type: 'string' },
        schema: { type: 'string', default: join('prisma', 'schema.prisma') },
        migrations: { type: 'string' },
        name: { type: 'string', short: 'n' },
        'create-only': { type: 'boolean', default: false },
        'accept-data-loss': { type: 'boolean', default: false },
        force: { type: 'boolean', short: 'f', default: false },
        help: { type: 'boolean', default: false },
      },
    })
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
  const { values: args, positionals } = parsed
  if (args.help) {
    console.log(HELP)
    return 0
  }
  const [group, command, ...extra] = positionals
  if (group !== 'migrate' || !COMMANDS.includes(command as Command) || extra.length > 0) {
    throw new UsageError(`unknown command \`${positionals.join(' ')}\`: expected \`migrate ${COMMANDS.join('|')}\``)
  }
  if (!args.db) throw new UsageError('`--db <dir>` is required: the data directory to migrate')
  if (args.db.startsWith('memory://')) throw new UsageError('`--db` must be a data directory: an in-memory database ends with the command')
  const migrationsDir = args.migrations ?? join(dirname(args.schema), 'migrations')
  const fromHere = relative(process.cwd(), migrationsDir)
  const shownDir = fromHere.startsWith('..') ? resolve(migrationsDir) : fromHere || '.'

  let schema: string | undefined
  if (command === 'dev') {
    try {
      schema = await readFile(args.schema, 'utf8')
    } catch (error) {
      throw new UsageError(`cannot read the Prisma schema at ${args.schema} (${(error as NodeJS.ErrnoException).code ?? String(error)}); pass \`--schema <file>\``)
    }
  }
  if (command === 'reset' && !args.force) {
    throw new UsageError('`migrate reset` drops every table and all data in the database: pass `--force` to confirm')
  }

  const db = await PGlite.create(args.db)
  try {
    switch (command as Command) {
      case 'dev': {
        const result = await migrateDev(db, {
          schema: schema!,
          migrationsDir,
          name: args.name,
          createOnly: args['create-only'],
          acceptDataLoss: args['accept-data-loss'],
        })
        const pending = result.appliedMigrationNames.filter((n) => n !== result.createdMigrationName)
        if (pending.length > 0) console.log(`The following migration(s) have been applied:\n${list(pending)}`)
        if (result.createdMigrationName === undefined) {
          console.log(pending.length > 0 ? 'Your database is now in sync with your schema.' : 'Already in sync, no schema change or pending migration was found.')
        } else if (args['create-only']) {
          console.log(`Created ${join(shownDir, result.createdMigrationName, 'migration.sql')} without applying it.`)
        } else {
          console.log(
            `The following migration has been created and applied from new schema changes:\n${list([join(shownDir, result.createdMigrationName, 'migration.sql')])}\n` +
              'Your database is now in sync with your schema. Run `prisma generate` if Prisma Client should see the change.',
          )
        }
        return 0
      }
      case 'deploy': {
        const { appliedMigrationNames } = await applyMigrations(db, { migrationsDir })
        console.log(appliedMigrationNames.length > 0 ? `The following migration(s) have been applied:\n${list(appliedMigrationNames)}` : 'No pending migrations to apply.')
        return 0
      }
      case 'status': {
        const status = await migrationStatus(db, { migrationsDir })
        const count = status.migrationNames.length
        console.log(count > 0 ? `${count} migration${count > 1 ? 's' : ''} found in ${shownDir}` : `No migration found in ${shownDir}`)
        if (status.unappliedMigrationNames.length > 0) console.log(`Following migration(s) have not yet been applied:\n${list(status.unappliedMigrationNames)}`)
        if (status.unpersistedMigrationNames.length > 0) console.log(`The migration(s) from the database are not found locally in ${shownDir}:\n${list(status.unpersistedMigrationNames)}`)
        if (status.failedMigrationNames.length > 0) console.log(`Following migration(s) have failed:\n${list(status.failedMigrationNames)}`)
        if (status.editedMigrationNames.length > 0) console.log(`Following migration(s) were modified after they were applied:\n${list(status.editedMigrationNames)}`)
        if (status.isUpToDate) console.log('Database schema is up to date!')
        return status.isUpToDate ? 0 : 1
      }
      case 'reset': {
        const { appliedMigrationNames } = await resetDatabase(db, { migrationsDir })
        console.log(`Database reset successful.${appliedMigrationNames.length > 0 ? `\nThe following migration(s) have been applied:\n${list(appliedMigrationNames)}` : ''}`)
        return 0
      }
    }
  } finally {
    // close() checkpoints: what the command committed is on disk.
    await db.close()
  }
}

function list(names: readonly string[]): string {
  return names.map((n) => `  ${n}`).join('\n')
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      console.error(`pgwasm-prisma: ${error.message}\n\n${HELP}`)
      process.exitCode = 2
      return
    }
    // Our own errors say what to do; anything else shows its class too.
    const known = error instanceof SchemaEngineError || error instanceof TypeError
    console.error(`pgwasm-prisma: ${error instanceof Error ? (known ? error.message : `${error.name}: ${error.message}`) : String(error)}`)
    process.exitCode = 1
  },
)
