import { stat } from 'node:fs/promises'
import { AuthThrottle } from '../session/auth-throttle.js'
import { PGlite, collectGarbageSoon, quoteIdent, type PGliteOptions } from '@pgwasm/pglite'
import type { AuthMethod } from '../session/auth.js'
import { Multiplexer, type DoorFacts, type SocketDatabase } from '../pooler/multiplexer.js'
import { CancelHelper } from './cancel-helper.js'
import type { CancelTarget, SessionHost } from '../session/session.js'

/** A startup packet named a database the server does not have (FATAL 3D000 for the client). */
export class UnknownDatabaseError extends Error {
  readonly code = 'UNKNOWN_DATABASE'
  readonly database: string

  constructor(database: string) {
    super(`database "${database}" does not exist`)
    this.name = 'UnknownDatabaseError'
    this.database = database
  }
}

function nonNegative(value: number, name: string): number {
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`\`${name}\` must be a number >= 0, got ${value}`)
  return value
}

/** One multiplexer per database object: the TCP server and in-process bridges share it. */
const multiplexers = new WeakMap<SocketDatabase, Multiplexer>()

export function multiplexerFor(db: SocketDatabase): Multiplexer {
  let mux = multiplexers.get(db)
  // The process's cancel helper hears that this thread is busy, whoever's statement runs.
  if (!mux) multiplexers.set(db, (mux = new Multiplexer(db, () => CancelHelper.current?.busy())))
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
   * How long a client may sit idle inside a transaction block when it has
   * not set `idle_in_transaction_session_timeout` itself (its own non-zero
   * setting wins): it is then rolled back and disconnected with FATAL 25P03.
   * A client in a transaction holds the one engine and every other client
   * waits for it, so the default is not "forever". 0 turns it off.
   * @default 60000
   */
  readonly idleInTransactionTimeoutMs?: number
  /**
   * A connection that has not completed startup and authentication within
   * this is closed (PostgreSQL's `authentication_timeout`). @default 60000
   */
  readonly authenticationTimeoutMs?: number
  /**
   * The longest a client's request may hold the engine, in ms, whatever the
   * client's own `statement_timeout` (which it may turn off): past it the
   * statement fails with 57014 "canceling statement due to user request",
   * as if the server had sent a CancelRequest. Enforced where the statement
   * calls out of the engine (clock reads, file I/O): a PL/pgSQL loop that
   * never does runs on. 0 turns it off. @default 0
   */
  readonly maxStatementMs?: number
  /**
   * COPY FROM STDIN data a client may send before CopyDone (the engine
   * takes it in one piece, so the server holds it); more fails the COPY.
   * @default 268435456 (256 MiB)
   */
  readonly maxCopyBytes?: number
  /**
   * A COPY FROM STDIN whose data passes 1 MiB no longer waits for CopyDone:
   * the engine runs it while the rest arrives, reading the client's socket
   * as it needs data (less memory, and the upload and the load overlap).
   * The engine is that client's meanwhile, so a COPY whose data stops for
   * this long fails with 57014. 0 holds every COPY's data until CopyDone, as
   * before (the data is then capped by {@link maxCopyBytes}). @default 5000
   */
  readonly copyStallMs?: number
  /**
   * Give a database name a startup packet names, that neither is served nor
   * was made with CREATE DATABASE, its own new instance (after the client
   * authenticated). Otherwise such a client gets FATAL 3D000. @default false
   */
  readonly createDatabaseOnConnect?: boolean
  /**
   * Serve `db` whatever database a client names, instead of giving other
   * names their own instance. @default false (true for the in-process bridge)
   */
  readonly anyDatabaseName?: boolean
  /** Makes the instance for another database name; default: in memory, or a directory beside an on-disk one. */
  readonly createDatabase?: (name: string) => Promise<SocketDatabase>
  /**
   * Options for the instances the default `createDatabase` makes (the
   * CLI passes the ones it opened the main database with: `extensions`,
   * `maxMemory`, `postgresqlConf`).
   */
  readonly databaseOptions?: PGliteOptions
  /**
   * The role every client runs as, instead of the engine's superuser: made
   * when missing (LOGIN, all rights on schema public), then locked in as the
   * session user of each served database (`PGlite.lockSessionUser`), so no
   * client can read or write server files, load libraries, change server
   * settings or become the superuser again.
   */
  readonly role?: string
  /**
   * How long a database other than the main one stays loaded after its last
   * client left (ms). Then its instance is closed: a directory-backed one
   * opens again from its folder at the next connect, an in-memory one is
   * kept as a compressed archive of its data directory and loaded from it.
   * Only databases this server made itself (not a `createDatabase`
   * option's). 0: never. @default 30000
   */
  readonly idleDatabaseMs?: number
  readonly debug?: boolean
}

/** How long a terminated client's pid still counts as signaled (the statement that ended it runs once the engine is free). */
const TERMINATED_KEPT_MS = 60_000

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
  readonly idleInTransactionTimeoutMs: number
  readonly maxStatementMs: number
  readonly authenticationTimeoutMs: number
  readonly maxCopyBytes: number
  readonly copyStallMs: number
  readonly authThrottle = new AuthThrottle()
  readonly #createOnConnect: boolean
  serverVersion = '18.0'
  readonly #main: SocketDatabase
  readonly #mainName: string
  readonly #others = new Map<string, Promise<SocketDatabase>>()
  /** Clients of each of the others, and the timer that unloads one nobody uses. */
  readonly #users = new Map<string, number>()
  readonly #unloadTimers = new Map<string, ReturnType<typeof setTimeout>>()
  /** In-memory databases unloaded while idle: their data directories, to load again. */
  readonly #archives = new Map<string, Blob>()
  /** Unloads under way: a connect waits for them. */
  readonly #unloading = new Map<string, Promise<void>>()
  /** The last unload queued: each waits for the one before. */
  #unloadTurn: Promise<void> = Promise.resolve()
  readonly #idleDatabaseMs: number
  readonly #ownCreate: boolean
  readonly #create: (name: string) => Promise<SocketDatabase>
  readonly #debug: boolean
  readonly #anyName: boolean
  /** See HostOptions.role. */
  readonly role: string | undefined
  readonly #databaseOptions: PGliteOptions

  constructor(options: HostOptions) {
    this.#databaseOptions = options.databaseOptions ?? {}
    this.#main = options.db
    this.#mainName = options.databaseName ?? 'postgres'
    // An empty password is no password (it would let anyone in who sends nothing).
    this.password = options.password || undefined
    this.idleInTransactionTimeoutMs = nonNegative(options.idleInTransactionTimeoutMs ?? 60_000, 'idleInTransactionTimeoutMs')
    this.maxStatementMs = nonNegative(options.maxStatementMs ?? 0, 'maxStatementMs')
    this.authenticationTimeoutMs = nonNegative(options.authenticationTimeoutMs ?? 60_000, 'authenticationTimeoutMs')
    this.maxCopyBytes = nonNegative(options.maxCopyBytes ?? 256 * 1024 * 1024, 'maxCopyBytes')
    this.copyStallMs = nonNegative(options.copyStallMs ?? 5000, 'copyStallMs')
    this.#createOnConnect = options.createDatabaseOnConnect ?? false
    this.authMethod = options.authMethod ?? 'scram-sha-256'
    this.syncTimeoutMs = options.syncTimeoutMs ?? 30_000
    this.maxMessageBytes = options.maxMessageBytes ?? 1 << 30
    this.#debug = options.debug ?? false
    this.#anyName = options.anyDatabaseName ?? false
    const create = options.createDatabase ?? ((name: string) => this.#defaultCreate(name))
    this.#ownCreate = options.createDatabase === undefined
    this.#idleDatabaseMs = nonNegative(options.idleDatabaseMs ?? 30_000, 'idleDatabaseMs')
    this.role = options.role
    this.#create = async (name) => {
      const db = await create(name)
      await this.#runAsRole(db)
      return db
    }
  }

  /** Makes the `role` option's role if missing and locks it in as `db`'s session user. */
  async #runAsRole(db: SocketDatabase): Promise<void> {
    const role = this.role
    if (role === undefined) return
    if (!db.lockSessionUser) throw new Error('the role option needs a database with lockSessionUser() (a PGlite instance)')
    const { rows } = await db.query<{ exists: boolean }>('select exists (select 1 from pg_catalog.pg_roles where rolname = $1) as exists', [role])
    if (!rows[0]?.exists) {
      const quoted = quoteIdent(role)
      await db.query(`create role ${quoted} login`)
      await db.query(`grant all on schema public to ${quoted}`)
    }
    await db.lockSessionUser(role)
  }

  #initialized: Promise<void> | undefined

  /** Reads the engine's version for ParameterStatus (once). */
  init(): Promise<void> {
    this.#initialized ??= (async () => {
      await this.#runAsRole(this.#main)
      const { rows } = await this.#main.query<{ server_version: string }>('show server_version')
      if (rows[0]) this.serverVersion = rows[0].server_version
    })()
    return this.#initialized
  }

  /**
   * The multiplexer of the database `name`, making its instance on first use.
   * @throws {UnknownDatabaseError} for a name that is not served, was not made
   *   with CREATE DATABASE, and `createDatabaseOnConnect` is off.
   */
  async database(name: string): Promise<Multiplexer> {
    if (name === this.#mainName || this.#anyName) return multiplexerFor(this.#main)
    await this.#unloading.get(name)
    let db = this.#others.get(name)
    if (!db && !this.#createOnConnect && !(await this.#madeByCreateDatabase(name))) throw new UnknownDatabaseError(name)
    db ??= this.#others.get(name)
    if (!db) {
      db = this.#create(name)
      this.#others.set(name, db)
      db.catch(() => this.#others.delete(name))
    }
    const mux = multiplexerFor(await db)
    this.#inUse.set(name, mux)
    this.#users.set(name, (this.#users.get(name) ?? 0) + 1)
    clearTimeout(this.#unloadTimers.get(name))
    this.#unloadTimers.delete(name)
    return mux
  }

  /**
   * What the cancel helper may let in while this thread runs a statement,
   * by database name (`*`: any name is the main database): the main one and
   * the others that have a client now. With a password, none while the
   * throttle holds a failed attempt: the helper checks passwords without
   * the throttle's waits, so guesses then wait for this thread.
   */
  doorFacts(): Record<string, DoorFacts> {
    const out: Record<string, DoorFacts> = {}
    if (this.password !== undefined && this.authThrottle.holdsFailures) return out
    const main = multiplexerFor(this.#main).doorFacts()
    if (main) out[this.#anyName ? '*' : this.#mainName] = main
    for (const [name, mux] of this.#inUse) {
      const facts = mux.doorFacts()
      if (facts) out[name] = facts
    }
    return out
  }

  /** The multiplexers of the other databases that have a client now, by name. */
  readonly #inUse = new Map<string, Multiplexer>()

  /** A client of database `name` (one {@link database} returned) is gone, its cleanup done. */
  left(name: string): void {
    const users = (this.#users.get(name) ?? 0) - 1
    if (users > 0) return void this.#users.set(name, users)
    this.#users.delete(name)
    this.#inUse.delete(name)
    if (!this.#others.has(name) || !this.#ownCreate || this.#idleDatabaseMs === 0) return
    const timer = setTimeout(() => {
      this.#unloadTimers.delete(name)
      if (this.#users.has(name)) return
      // One at a time: databases that went idle together would each hold an engine and its archive at once.
      const unloading = (this.#unloadTurn = this.#unloadTurn.then(() => this.#unload(name))).finally(() => this.#unloading.delete(name))
      this.#unloading.set(name, unloading)
    }, this.#idleDatabaseMs)
    timer.unref?.()
    this.#unloadTimers.set(name, timer)
  }

  /** The names of the other databases loaded now. */
  get loadedDatabases(): string[] {
    return [...this.#others.keys()]
  }

  async #unload(name: string): Promise<void> {
    const loading = this.#others.get(name)
    if (!loading) return
    try {
      const db = await loading
      const dir = this.#main.dataDir
      if (!(dir && !dir.startsWith('memory://'))) {
        const dump = (db as { dumpDataDir?: (compression?: 'gzip' | 'none' | 'auto') => Promise<Blob> }).dumpDataDir
        if (!dump) return
        this.#archives.set(name, await dump.call(db, 'gzip'))
      }
      this.#others.delete(name)
      await db.close()
      // The engine's memory goes back now, before the next unload takes more: V8 frees a
      // dropped wasm memory only in a full collection, which an idle process runs late.
      collectGarbageSoon()
      await new Promise((resolve) => setTimeout(resolve, 0))
    } catch (err) {
      this.log(`database ${name}: unloading it failed, it stays loaded: ${String(err)}`)
    }
  }

  async #madeByCreateDatabase(name: string): Promise<boolean> {
    const { rows } = await this.#main.query('select 1 from pg_database where datname = $1', [name])
    return rows.length > 0
  }

  async #defaultCreate(name: string): Promise<SocketDatabase> {
    const dir = this.#main.dataDir
    const onDisk = dir && !dir.startsWith('memory://')
    const archive = this.#archives.get(name)
    this.#archives.delete(name)
    const options = archive ? { ...this.#databaseOptions, loadDataDir: archive } : this.#databaseOptions
    return PGlite.create(onDisk ? await databaseFolder(dir, name) : undefined, options)
  }

  dropped(name: string): void {
    this.#archives.delete(name)
    this.#inUse.delete(name)
    const db = this.#others.get(name)
    if (!db) return
    this.#others.delete(name)
    void db.then((d) => d.close()).catch(() => {})
  }

  /** Sessions by process id, for CancelRequest. */
  readonly #sessions = new Map<number, CancelTarget>()

  track(session: CancelTarget): void {
    this.#sessions.set(session.processId, session)
  }

  untrack(session: CancelTarget): void {
    if (this.#sessions.get(session.processId) === session) this.#sessions.delete(session.processId)
  }

  /**
   * A CancelRequest: a statement of that session that waits for the engine
   * (behind another client, or for an advisory lock) fails with 57014. One
   * that runs is stopped through {@link cancelHelper} (this thread reads no
   * socket while the engine runs).
   */
  cancel(processId: number, secret: number): void {
    const session = this.#sessions.get(processId)
    // A wrong key is ignored without a word, as PostgreSQL does.
    if (!session || session.secret !== secret) return
    if (!session.cancelWaiting()) this.log(`cancel request for session ${processId}: nothing of it waits`)
  }

  /**
   * `pg_terminate_backend(pid)` or `pg_cancel_backend(pid)` from a client of
   * another database of this server: its connection ends with FATAL 57P01
   * (after the calling statement), or its statement that waits for the
   * engine fails with 57014 (none of it can be running: this thread runs
   * the caller's).
   */
  signal(processId: number, signal: 'terminate' | 'cancel'): boolean {
    const session = this.#sessions.get(processId)
    if (!session) return this.#terminated.has(processId)
    if (signal === 'terminate') {
      this.#terminated.add(processId)
      // Forgotten soon: pids are not reused, this only answers the statement that asked.
      setTimeout(() => this.#terminated.delete(processId), TERMINATED_KEPT_MS).unref?.()
      queueMicrotask(() => session.terminate('57P01', 'terminating connection due to administrator command'))
    } else {
      session.cancelWaiting()
    }
    return true
  }

  /** Pids ended by `pg_terminate_backend()` lately: a call naming one again, after it is gone, still answers true. */
  readonly #terminated = new Set<number>()

  /** Takes the CancelRequests that come while the engine runs a statement (the TCP and Unix socket server sets it). */
  cancelHelper: CancelHelper | undefined

  canceledWhileRunning(processId: number, secret: number): boolean {
    return this.cancelHelper?.canceledWhileRunning(processId, secret) ?? false
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

/**
 * The folder of database `name` beside the main one's `dir`: one folder per
 * name and one name per folder. Lower-case letters, digits, `.`, `_` and `-`
 * stay; any other byte of the name's UTF-8 is written `%XX`, so `x y`
 * (`x%20y`) and `x_y` are two folders, and so are `Foo` and `foo` on a
 * file system that ignores case. A folder an earlier version made for a
 * name it wrote unchanged (letters of either case, digits, `_`, `.`, `-`)
 * is still found under that name.
 */
export async function databaseFolder(dir: string, name: string): Promise<string> {
  const base = `${dir.replace(/\/+$/, '')}.db-`
  const folder = base + encodeDatabaseName(name)
  const earlier = base + name
  if (folder !== earlier && /^[\w.-]+$/.test(name) && !(await exists(folder)) && (await exists(earlier))) return earlier
  return folder
}

export function encodeDatabaseName(name: string): string {
  let out = ''
  for (const byte of new TextEncoder().encode(name)) {
    const raw = (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte === 0x2e || byte === 0x5f || byte === 0x2d
    out += raw ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}
