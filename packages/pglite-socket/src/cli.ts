#!/usr/bin/env node
import { parseArgs } from 'node:util'
import { PGlite, type PGliteOptions } from '@pgwasm/pglite'
import { AUTH_METHODS, type AuthMethod } from './session/auth.js'
import { extensionsFor } from './cli-extensions.js'
import { CancelHelper } from './net/cancel-helper.js'
import { PGliteServer } from './net/server.js'

const HELP = `pgwasm-server: serve a pgwasm database over the PostgreSQL protocol

Options:
  --db <dir|memory://>     data directory (default: memory://, in memory)
  --host <addr>            TCP address (default 127.0.0.1)
  --port <n>               TCP port, 0 for any free one (default 5432)
  --path <file>            Unix socket path instead of TCP
  --max-connections <n>    client limit (default 100)
  --password <secret>      require this password (or env PGWASM_PASSWORD)
  --auth-method <m>        scram-sha-256 | md5 | password (default scram-sha-256)
  --trust-remote           allow a non-loopback --host without a password
                           (an empty password counts as none)
  --idle-in-transaction-timeout <ms>
                           end a client idle in a transaction this long, unless
                           it set idle_in_transaction_session_timeout itself;
                           0: never (default 60000)
  --max-statement-time <ms>
                           cancel a client's request that runs longer (57014),
                           whatever its own statement_timeout; 0: no limit
                           (default 0)
  --max-memory <size>      the most the engine may hold in memory, its heap and
                           its in-memory files together: bytes, or a number
                           with kB, MB or GB; a statement that needs more
                           fails (53200 or 53100) and the others go on
                           (default 4GB)
  --max-unread-total <size>
                           output all clients together have not read, past
                           which the client whose output passes it is
                           disconnected: bytes, or a number with kB, MB or GB
                           (default 1GB)
  --max-incoming-total <size>
                           what all clients together have sent that the server
                           holds and has not run yet (a message still arriving,
                           statements waiting their turn), past which the
                           client whose bytes pass it is disconnected (FATAL
                           53200): bytes, or a number with kB, MB or GB
                           (default 1GB)
  --idle-database-timeout <ms>
                           unload a database other than the main one this
                           long after its last client left (a directory one
                           opens again from its folder, an in-memory one from
                           an archive of it); 0: never (default 30000)
  --max-copy-bytes <size>  COPY FROM STDIN data one client may send before
                           CopyDone, held in memory until then: bytes, or a
                           number with kB, MB or GB (default 256MB)
  --copy-stall-timeout <ms>
                           a COPY past 1 MB of data runs while the rest
                           arrives, the engine reading it from the client;
                           its data stopping this long fails it (57014);
                           0: hold all COPY data until CopyDone (default 5000)
  --authentication-timeout <ms>
                           close a connection not through startup and password
                           in this time (default 60000)
  --extensions <list>      what CREATE EXTENSION can create: all (every contrib
                           module, and pgvector when @electric-sql/pglite-pgvector
                           is installed), none, or names (hstore,pg_trgm,vector);
                           each is compiled when a database first loads it
                           (default all)
  --max-prepared-transactions <n>
                           transactions PREPARE TRANSACTION can hold for
                           COMMIT PREPARED (two-phase commit); 0 turns it off
                           (default 32)
  --role <name>            run every client as this role instead of the
                           superuser (made when missing: LOGIN, rights on
                           schema public); clients cannot switch back
  --create-database-on-connect
                           give a database name a client connects to that does
                           not exist its own new instance (default: FATAL 3D000)
  --no-cancel-running      no helper process: a CancelRequest then stops only
                           a statement that waits for the engine, not one
                           that runs
  --debug                  log sessions to stderr
  --help`

async function main(): Promise<number> {
  let args
  try {
    args = parseArgs({
      options: {
        db: { type: 'string', default: 'memory://' },
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string', default: '5432' },
        path: { type: 'string' },
        'max-connections': { type: 'string', default: '100' },
        password: { type: 'string' },
        'auth-method': { type: 'string', default: 'scram-sha-256' },
        'trust-remote': { type: 'boolean', default: false },
        'idle-in-transaction-timeout': { type: 'string', default: '60000' },
        'authentication-timeout': { type: 'string', default: '60000' },
        'max-statement-time': { type: 'string', default: '0' },
        'max-copy-bytes': { type: 'string', default: '256MB' },
        'max-memory': { type: 'string', default: '4GB' },
        'max-unread-total': { type: 'string', default: '1GB' },
        'max-incoming-total': { type: 'string', default: '1GB' },
        'idle-database-timeout': { type: 'string', default: '30000' },
        'copy-stall-timeout': { type: 'string', default: '5000' },
        'create-database-on-connect': { type: 'boolean', default: false },
        role: { type: 'string' },
        extensions: { type: 'string', default: 'all' },
        'max-prepared-transactions': { type: 'string', default: '32' },
        'no-cancel-running': { type: 'boolean', default: false },
        debug: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    }).values
  } catch (err) {
    console.error(`pgwasm-server: ${err instanceof Error ? err.message : String(err)}\n\n${HELP}`)
    return 2
  }
  if (args.help) {
    console.log(HELP)
    return 0
  }
  const port = Number(args.port)
  const maxConnections = Number(args['max-connections'])
  if (!Number.isInteger(port) || port < 0 || port > 65535) return usage(`--port must be 0-65535, got ${args.port}`)
  if (!Number.isInteger(maxConnections) || maxConnections < 1) return usage(`--max-connections must be a positive integer`)
  const idleInTransactionTimeoutMs = Number(args['idle-in-transaction-timeout'])
  const authenticationTimeoutMs = Number(args['authentication-timeout'])
  if (!Number.isInteger(idleInTransactionTimeoutMs) || idleInTransactionTimeoutMs < 0) {
    return usage(`--idle-in-transaction-timeout must be a whole number of ms >= 0, got ${args['idle-in-transaction-timeout']}`)
  }
  if (!Number.isInteger(authenticationTimeoutMs) || authenticationTimeoutMs < 0) {
    return usage(`--authentication-timeout must be a whole number of ms >= 0, got ${args['authentication-timeout']}`)
  }
  const maxStatementMs = Number(args['max-statement-time'])
  if (!Number.isInteger(maxStatementMs) || maxStatementMs < 0) {
    return usage(`--max-statement-time must be a whole number of ms >= 0, got ${args['max-statement-time']}`)
  }
  const maxCopyBytes = byteSize(args['max-copy-bytes'])
  if (maxCopyBytes === undefined) return usage(`--max-copy-bytes must be a whole number of bytes, kB, MB or GB, got ${args['max-copy-bytes']}`)
  const maxMemory = byteSize(args['max-memory'])
  if (!maxMemory) return usage(`--max-memory must be a positive whole number of bytes, kB, MB or GB, got ${args['max-memory']}`)
  const maxUnreadBytesTotal = byteSize(args['max-unread-total'])
  if (!maxUnreadBytesTotal) return usage(`--max-unread-total must be a positive whole number of bytes, kB, MB or GB, got ${args['max-unread-total']}`)
  const maxIncomingBytesTotal = byteSize(args['max-incoming-total'])
  if (!maxIncomingBytesTotal) return usage(`--max-incoming-total must be a positive whole number of bytes, kB, MB or GB, got ${args['max-incoming-total']}`)
  const idleDatabaseMs = Number(args['idle-database-timeout'])
  if (!Number.isInteger(idleDatabaseMs) || idleDatabaseMs < 0) {
    return usage(`--idle-database-timeout must be a whole number of ms >= 0, got ${args['idle-database-timeout']}`)
  }
  const copyStallMs = Number(args['copy-stall-timeout'])
  if (!Number.isInteger(copyStallMs) || copyStallMs < 0) {
    return usage(`--copy-stall-timeout must be a whole number of ms >= 0, got ${args['copy-stall-timeout']}`)
  }
  const authMethod = args['auth-method'] as AuthMethod
  if (!AUTH_METHODS.includes(authMethod)) return usage(`--auth-method must be one of ${AUTH_METHODS.join(', ')}`)
  const maxPrepared = Number(args['max-prepared-transactions'])
  if (!Number.isInteger(maxPrepared) || maxPrepared < 0 || maxPrepared > 10_000) {
    return usage(`--max-prepared-transactions must be a whole number 0-10000, got ${args['max-prepared-transactions']}`)
  }
  let extensions: Awaited<ReturnType<typeof extensionsFor>>
  try {
    extensions = await extensionsFor(args.extensions)
  } catch (err) {
    return usage(`--extensions: ${err instanceof Error ? err.message : String(err)}`)
  }
  // Every database the server opens gets the same: the main one and those made by name.
  const databaseOptions: PGliteOptions = { maxMemory, extensions, postgresqlConf: { max_prepared_transactions: maxPrepared } }

  // Started beside the database's start rather than after it (server.start() would start it too).
  if (!args['no-cancel-running']) void CancelHelper.shared()
  let db: PGlite
  try {
    db = await PGlite.create(args.db, databaseOptions)
  } catch (err) {
    console.error(`pgwasm-server: cannot open the database ${args.db}: ${err instanceof Error ? err.message : String(err)}`)
    return 1
  }
  const server = new PGliteServer({
    db,
    host: args.host,
    port,
    path: args.path,
    maxConnections,
    // An empty --password or PGWASM_PASSWORD is no password (refused beyond loopback).
    password: (args.password ?? process.env.PGWASM_PASSWORD) || undefined,
    authMethod,
    trustRemote: args['trust-remote'],
    idleInTransactionTimeoutMs,
    authenticationTimeoutMs,
    maxStatementMs,
    maxCopyBytes,
    copyStallMs,
    createDatabaseOnConnect: args['create-database-on-connect'],
    databaseOptions,
    maxUnreadBytesTotal,
    maxIncomingBytesTotal,
    idleDatabaseMs,
    role: args.role,
    debug: args.debug,
    cancelRunning: !args['no-cancel-running'],
  })
  server.on('warning', (message: string) => console.warn(`pgwasm-server: warning: ${message}`))
  try {
    await server.start()
  } catch (err) {
    console.error(`pgwasm-server: ${err instanceof Error ? err.message : String(err)}`)
    await db.close()
    return 1
  }
  // The handlers go in before the line that says we serve: a supervisor may
  // signal as soon as it reads that line, and without a handler the signal
  // would end the process before the shutdown checkpoint.
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      console.log(`pgwasm-server: ${signal}: shutting down`)
      resolve()
    }
    process.once('SIGINT', () => stop('SIGINT'))
    process.once('SIGTERM', () => stop('SIGTERM'))
  })
  // Serving means a CancelRequest can stop a running statement too (a warning said so where it cannot).
  await server.cancelReady
  console.log(`pgwasm-server: serving ${args.db} at ${server.connectionString}`)
  await stopped
  await server.stop()
  // close() runs Postgres' shutdown checkpoint: nothing committed is lost.
  await db.close()
  console.log('pgwasm-server: stopped')
  return 0
}

const UNITS: Record<string, number> = { '': 1, B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 }

/** `1048576`, `512kB`, `256MB` or `1GB` (units of 1024, as Postgres reads them) in bytes; undefined for anything else. */
function byteSize(text: string): number | undefined {
  const match = /^(\d+)\s*([a-z]*)$/i.exec(text.trim())
  const unit = match ? UNITS[match[2]!.toUpperCase()] : undefined
  if (!match || unit === undefined) return undefined
  const bytes = Number(match[1]) * unit
  return Number.isSafeInteger(bytes) ? bytes : undefined
}

function usage(message: string): number {
  console.error(`pgwasm-server: ${message}\n\n${HELP}`)
  return 2
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error('pgwasm-server: fatal:', err)
    process.exit(1)
  },
)
