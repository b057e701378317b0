import { PGlite } from '@pgwasm/pglite'
import type { AuthMethod } from './auth.js'
import { Multiplexer, type SocketDatabase } from './multiplexer.js'
import type { SessionHost } from './session.js'

/** One multiplexer per database object: the TCP server and in-process bridges share it. */
const multiplexers = new WeakMap<SocketDatabase, Multiplexer>()

export function multiplexerFor(db: SocketDatabase): Multiplexer {
  let mux = multiplexers.get(db)
  if (!mux) multiplexers.set(db, (mux = new Multiplexer(db)))
  return mux
}

export interface HostOptions {
  readonly db: SocketDatabase
  /** The name the served database answers to. @default 'postgres' */
  readonly databaseName?: string
  readonly password?: string
  readonly authMethod?: AuthMethod
  readonly syncTimeoutMs?: number
  readonly maxMessageBytes?: number
  /**
   * Serve `db` whatever database a client names, instead of giving other
   * names their own instance. @default false (true for the in-process bridge)
   */
  readonly anyDatabaseName?: boolean
  /** Makes the instance for another database name; default: in memory, or a directory beside an on-disk one. */
  readonly createDatabase?: (name: string) => Promise<SocketDatabase>
  readonly debug?: boolean
}

/**
 * The databases and settings sessions share. Another database name in a
 * startup packet gets its own instance, made on first connect (tools such as
 * `prisma migrate dev` create and use a shadow database).
 */
export class DatabaseHost implements SessionHost {
  readonly password: string | undefined
  readonly authMethod: AuthMethod
  readonly syncTimeoutMs: number
  readonly maxMessageBytes: number
  serverVersion = '18.0'
  readonly #main: SocketDatabase
  readonly #mainName: string
  readonly #others = new Map<string, Promise<SocketDatabase>>()
  readonly #create: (name: string) => Promise<SocketDatabase>
  readonly #debug: boolean
  readonly #anyName: boolean

  constructor(options: HostOptions) {
    this.#main = options.db
    this.#mainName = options.databaseName ?? 'postgres'
    this.password = options.password
    this.authMethod = options.authMethod ?? 'scram-sha-256'
    this.syncTimeoutMs = options.syncTimeoutMs ?? 30_000
    this.maxMessageBytes = options.maxMessageBytes ?? 1 << 30
    this.#debug = options.debug ?? false
    this.#anyName = options.anyDatabaseName ?? false
    this.#create = options.createDatabase ?? ((name) => this.#defaultCreate(name))
  }

  #initialized: Promise<void> | undefined

  /** Reads the engine's version for ParameterStatus (once). */
  init(): Promise<void> {
    this.#initialized ??= this.#main.query<{ server_version: string }>('show server_version').then(({ rows }) => {
      if (rows[0]) this.serverVersion = rows[0].server_version
    })
    return this.#initialized
  }

  async database(name: string): Promise<Multiplexer> {
    if (name === this.#mainName || this.#anyName) return multiplexerFor(this.#main)
    let db = this.#others.get(name)
    if (!db) {
      db = this.#create(name)
      this.#others.set(name, db)
      db.catch(() => this.#others.delete(name))
    }
    return multiplexerFor(await db)
  }

  async #defaultCreate(name: string): Promise<SocketDatabase> {
    const dir = this.#main.dataDir
    const onDisk = dir && !dir.startsWith('memory://')
    const safe = name.replace(/[^\w.-]/g, '_')
    return PGlite.create(onDisk ? `${dir.replace(/\/+$/, '')}.db-${safe}` : undefined)
  }

  dropped(name: string): void {
    const db = this.#others.get(name)
    if (!db) return
    this.#others.delete(name)
    void db.then((d) => d.close()).catch(() => {})
  }

  cancel(processId: number): void {
    // The engine runs each request to the end synchronously: nothing to stop.
    this.log(`cancel request for session ${processId} ignored`)
  }

  log(message: string): void {
    if (this.#debug) console.error(`[pgwasm-server] ${message}`)
  }

  /** Closes the instances this host created (not the served one). */
  async closeCreated(): Promise<void> {
    const dbs = [...this.#others.values()]
    this.#others.clear()
    await Promise.all(dbs.map((p) => p.then((d) => d.close()).catch(() => {})))
  }
}
