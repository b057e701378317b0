#!/usr/bin/env node
import { parseArgs } from 'node:util'
import { PGlite } from '@pgwasm/pglite'
import { AUTH_METHODS, type AuthMethod } from './auth.js'
import { PGliteServer } from './server.js'

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
  const authMethod = args['auth-method'] as AuthMethod
  if (!AUTH_METHODS.includes(authMethod)) return usage(`--auth-method must be one of ${AUTH_METHODS.join(', ')}`)

  let db: PGlite
  try {
    db = await PGlite.create(args.db)
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
    password: args.password ?? process.env.PGWASM_PASSWORD,
    authMethod,
    trustRemote: args['trust-remote'],
    debug: args.debug,
  })
  server.on('warning', (message: string) => console.warn(`pgwasm-server: warning: ${message}`))
  try {
    await server.start()
  } catch (err) {
    console.error(`pgwasm-server: ${err instanceof Error ? err.message : String(err)}`)
    await db.close()
    return 1
  }
  console.log(`pgwasm-server: serving ${args.db} at ${server.connectionString}`)
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      console.log(`pgwasm-server: ${signal}: shutting down`)
      resolve()
    }
    process.once('SIGINT', () => stop('SIGINT'))
    process.once('SIGTERM', () => stop('SIGTERM'))
  })
  await server.stop()
  // close() runs Postgres' shutdown checkpoint: nothing committed is lost.
  await db.close()
  console.log('pgwasm-server: stopped')
  return 0
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
