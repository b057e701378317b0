/**
 * Shared helpers of the pglite-socket tests: servers on a fresh database, pg
 * clients of them, and the CLI as a child process. What is not about this
 * server (raw wire clients, frames, native PostgreSQL, waiting, temp dirs)
 * comes from @pgwasm/test-support.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import pg from 'pg'
import { afterAll, beforeAll } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { Waiters, within } from '@pgwasm/test-support/async'
import { HOST } from '@pgwasm/test-support/net'
import { run, type ProcessResult } from '@pgwasm/test-support/processes'
import { PGliteServer, type PGliteServerOptions } from '../src/index.js'

export interface Served {
  server: PGliteServer
  port: number
  url: string
}

/** Starts a TCP server on 127.0.0.1 with a free port. */
export async function serve(db: PGlite, options: Omit<PGliteServerOptions, 'db'> = {}): Promise<Served> {
  const server = new PGliteServer({ host: HOST, port: 0, ...options, db })
  const address = await server.start()
  if (!('port' in address)) throw new Error('expected a TCP address')
  return { server, port: address.port, url: server.connectionString }
}

/** A server that a suite run against both pgwasm-server and native PostgreSQL talks to. */
export interface SuiteTarget {
  port: number
  stop(): Promise<void>
}

/** pgwasm-server on a fresh in-memory database, as a {@link SuiteTarget}: stopping it closes the database too. */
export async function servedTarget(options: Omit<PGliteServerOptions, 'db'> = {}): Promise<SuiteTarget> {
  const db = await PGlite.create()
  const served = await serve(db, options)
  return {
    port: served.port,
    stop: async () => {
      await served.server.stop()
      await db.close()
    },
  }
}

/** A connected pg client of a TCP server (errors after a test's end are kept, not thrown). */
export async function pgClient(port: number, config: pg.ClientConfig = {}): Promise<TestClient> {
  const client = new pg.Client({ host: HOST, port, user: 'postgres', database: 'postgres', ...config }) as TestClient
  client.errors = []
  client.on('error', (err) => client.errors.push(err))
  await client.connect()
  return client
}

export type TestClient = pg.Client & { errors: Error[] }

/** A fresh database for the enclosing `describe` block (the hooks are registered here). */
export function useDatabase(setup?: (db: PGlite) => Promise<unknown>): { readonly db: PGlite } {
  let db: PGlite | undefined
  beforeAll(async () => {
    db = await PGlite.create()
    if (setup) await setup(db)
  })
  afterAll(async () => {
    await db?.close()
  })
  return {
    get db(): PGlite {
      if (!db) throw new Error('the database is made in beforeAll')
      return db
    },
  }
}

export interface ServedDatabase extends Served {
  readonly db: PGlite
  /** A pg client of the server, ended after the block. */
  connect(config?: pg.ClientConfig): Promise<TestClient>
}

/**
 * A fresh database served on 127.0.0.1 and a free port for the enclosing
 * `describe` block: started in beforeAll (after `setup`), stopped in
 * afterAll with the clients `connect` made.
 */
export function useServedDatabase(options: Omit<PGliteServerOptions, 'db'> = {}, setup?: (db: PGlite) => Promise<unknown>): ServedDatabase {
  const database = useDatabase(setup)
  let served: Served | undefined
  const clients: TestClient[] = []
  const started = (): Served => {
    if (!served) throw new Error('the server is started in beforeAll')
    return served
  }
  beforeAll(async () => {
    served = await serve(database.db, options)
  })
  afterAll(async () => {
    await Promise.all(clients.map((c) => endQuietly(c)))
    await served?.server.stop()
  })
  return {
    get db(): PGlite {
      return database.db
    },
    get server(): PGliteServer {
      return started().server
    },
    get port(): number {
      return started().port
    },
    get url(): string {
      return started().url
    },
    async connect(config: pg.ClientConfig = {}): Promise<TestClient> {
      const client = await pgClient(started().port, config)
      clients.push(client)
      return client
    },
  }
}

/** Ends a pg client, ignoring one that is gone already. */
export async function endQuietly(client: pg.Client | undefined): Promise<void> {
  if (!client) return
  await client.end().catch(() => {})
}

/** The process id and secret the server's BackendKeyData gave a `pg` client. */
export function backendKey(client: pg.Client): { processId: number; secret: number } {
  const keyed = client as unknown as { processID: number; secretKey: number }
  return { processId: keyed.processID, secret: keyed.secretKey }
}

// ---------------------------------------------------------------------------
// The CLI as a child process

const packageDir = resolve(fileURLToPath(new URL('.', import.meta.url)), '..')
const repoRoot = resolve(packageDir, '../..')
const cliPath = join(packageDir, 'src', 'cli.ts')
const tsxLoader = pathToFileURL(join(repoRoot, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href
/** How long the CLI may take to print what a test waits for. */
const CLI_MS = 60_000

/** The CLI as a child process (through tsx from source, or built), killed in `kill()`. */
export class Cli {
  readonly child: ChildProcess
  stdout = ''
  stderr = ''
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly #printed = new Waiters()

  /** `built`: the bundled `dist/cli.js`, as installed, instead of the source; `script`: another program of the tests', run the same way. */
  constructor(args: string[], { built = false, script }: { built?: boolean; script?: string } = {}) {
    const entry = built ? [join(packageDir, 'dist', 'cli.js')] : ['--import', tsxLoader, script ?? cliPath]
    this.child = spawn(process.execPath, [...entry, ...args], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: cliEnv(),
    })
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.stdout += d
      this.#printed.wake()
    })
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.stderr += d
      this.#printed.wake()
    })
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })))
    void this.exited.then(() => this.#printed.wake())
  }

  /** Resolves with the first match of `pattern` in stdout. */
  async waitFor(pattern: RegExp): Promise<RegExpExecArray> {
    const found = (async () => {
      for (;;) {
        const m = pattern.exec(this.stdout)
        if (m) return m
        if (this.child.exitCode !== null || this.child.signalCode !== null) {
          throw new Error(`the CLI exited before printing ${pattern}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)
        }
        await this.#printed.next()
      }
    })()
    return within(found, CLI_MS, `the CLI to print ${pattern}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL')
  }
}

/** Runs the CLI (through tsx from source) to its end; `env` replaces the test's environment without PGWASM_PASSWORD. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = cliEnv()): Promise<ProcessResult> {
  return run(process.execPath, ['--import', tsxLoader, cliPath, ...args], { timeoutMs: CLI_MS, cwd: repoRoot, env })
}

/** The test's environment without a password for the CLI to pick up. */
export function cliEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env.PGWASM_PASSWORD
  return env
}
