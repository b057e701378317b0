import { ClosedError, DatabaseError, EngineError, ProtocolError } from './errors.js'
import { claimDir, resolveDataDirOptions } from './fs/data-dir.js'
import type { BackendMessage } from './protocol/message-sink.js'
import type { TransactionOptions } from './query/abort.js'
import type { DescribeQueryResult, QueryOptions, Results } from './query/results.js'
import type { QueryRunner } from './query/runner.js'
import { query as templateQuery } from './query/template.js'
import { toChannelName, type ChannelListener, type NotificationListener } from './notify.js'
import { defaultParsers, defaultSerializers, type Parser, type Serializer } from './types/index.js'
import { BASE_ARGS, startArgsForStorage, type ExtensionNamespaces, type PGliteOptions } from './options.js'
import { fsDataDir } from './fs-compat/filesystem.js'
import { closeAddOns } from './extensions/add-on-closers.js'
import { attachAddOns, setUpAddOns, type ReadyAddOn } from './extensions/add-ons.js'
import { contribExtensions } from './extensions/contrib.js'
import { dumpName, packDataDir, type DumpCompression } from './fs/dump.js'
import { dumpSql } from './dump-sql.js'
import { cloneDatabase } from './instance/clone.js'
import { lockSessionUser } from './instance/session-user.js'
import { runExec, runQuery } from './instance/query-calls.js'
import { runTransaction } from './instance/transaction-handle.js'
import { openInstance } from './instance/open-instance.js'
import { InstanceEngine } from './instance/instance-engine.js'
import type { ExecProtocolOptions, ExecProtocolResult, ExecProtocolStreamOptions } from './exec-protocol-types.js'
import type { EngineLease } from './lease-types.js'
import type { Transaction } from './transaction-types.js'
import type { PGliteInterface } from './interface.js'

export type { PGliteOptions }
export type { ExecProtocolOptions, ExecProtocolResult, ExecProtocolStreamOptions } from './exec-protocol-types.js'
export type { EngineLease, LeaseClient } from './lease-types.js'
export type { Transaction } from './transaction-types.js'

const asyncDispose: typeof Symbol.asyncDispose =
  (Symbol as { asyncDispose?: typeof Symbol.asyncDispose }).asyncDispose ??
  (Symbol.for('nodejs.asyncDispose') as typeof Symbol.asyncDispose)

/**
 * A PostgreSQL database in WebAssembly, API-compatible with
 * `@electric-sql/pglite`. All calls are serialized through one queue.
 *
 * @example
 * ```ts
 * const db = await PGlite.create()
 * await db.exec('create table t (id int primary key, name text)')
 * await db.query('insert into t values ($1, $2)', [1, 'a'])
 * const { rows } = await db.query('select * from t')
 * await db.close()
 * ```
 */
export class PGlite implements PGliteInterface {
  /** The Postgres arguments every instance starts with (as PGlite's `defaultStartParams`); `startParams` replaces them. */
  static readonly defaultStartParams: readonly string[] = BASE_ARGS

  /** Resolves when the database is ready; rejects if it failed to start. */
  readonly waitReady: Promise<void>
  readonly dataDir: string | undefined
  readonly debug: number
  /** Parsers by type OID, used for results (array types added at start). */
  readonly parsers: Record<number, Parser>
  /** Serializers by parameter type OID. */
  readonly serializers: Record<number, Serializer>

  readonly #options: PGliteOptions
  readonly #engine: InstanceEngine
  #closePromise: Promise<void> | undefined
  readonly #extensionClosers: (() => Promise<void>)[] = []

  /**
   * @param dataDir `memory://` or nothing for an in-memory database; a path
   *   or `file://` path for a directory (Node).
   * @throws TypeError if `dataDir` is not a string; EngineError `BAD_DATA_DIR`
   *   for an unknown scheme or a `dataDir` that differs from `options.dataDir`.
   */
  constructor(dataDir?: string | PGliteOptions, options?: PGliteOptions) {
    const opts = withFsDataDir(resolveDataDirOptions<PGliteOptions>(dataDir, options))
    if (opts.maxMemory !== undefined && !(Number.isSafeInteger(opts.maxMemory) && opts.maxMemory > 0)) {
      throw new RangeError(`\`maxMemory\` must be a positive whole number of bytes, got ${String(opts.maxMemory)}`)
    }
    this.#options = opts
    this.dataDir = opts.dataDir
    this.debug = opts.debug ?? 0
    this.parsers = { ...defaultParsers, ...opts.parsers }
    this.serializers = { ...defaultSerializers, ...opts.serializers }
    const settings = {
      dataDir: opts.dataDir,
      username: opts.username,
      maxMemory: opts.maxMemory,
      statementCacheSize: opts.statementCache === false ? 0 : (opts.statementCache ?? 100),
      customSerializers: opts.serializers !== undefined && Object.keys(opts.serializers).length > 0,
      parsers: this.parsers,
      serializers: this.serializers,
    }
    this.#engine = new InstanceEngine(settings, () => this.waitReady)
    this.waitReady = this.#init()
    // An instance nobody awaits must not crash the process with an unhandled rejection.
    this.waitReady.catch(() => {})
  }

  /**
   * Creates an instance and waits until it is ready; typed with the
   * namespaces of its `extensions` (e.g. `db.live`).
   */
  static async create<O extends PGliteOptions>(
    dataDir?: string | O,
    options?: O,
  ): Promise<PGlite & ExtensionNamespaces<O['extensions']>> {
    const db = new PGlite(dataDir, options)
    await db.waitReady
    return db as PGlite & ExtensionNamespaces<O['extensions']>
  }

  /**
   * An in-memory database in the state `setup` leaves a new one in, saved
   * under `key`: the first call (per key and options) runs `setup` on a new
   * database and saves a snapshot of the result, in this process and in the
   * disk cache; later calls, in this process or another, restore that
   * snapshot instead, without starting Postgres or running `setup`
   * (about as fast as `create()` once warm).
   *
   * `key` must change whenever what `setup` does changes: a hash of the
   * schema or of the migration files, say. The saved state is also keyed by
   * the engine build and by the options that shape a started database
   * (`username`, `database`, `initdbArgs`, settings). Session state comes
   * along, as with `clone()`. A database whose `setup` ran `CREATE
   * EXTENSION` for contrib `extensions` (or pgvector) is saved too, keyed by
   * a digest of the bundles as well. A database that cannot be snapshotted
   * (`initialMemory`, or a side module that `setup` loaded and `extensions`
   * did not preload, an `onUse` one) is made by `setup` every time.
   *
   * @example
   * ```ts
   * const db = await PGlite.createCached('todo-schema-v1', async (db) => {
   *   await db.exec('create table todo (id serial primary key, title text not null)')
   * })
   * ```
   * @throws {TypeError} for a key that is not a non-empty string, a `setup`
   * that is not a function, or a `dataDir` other than `memory://`.
   * @throws {Error} when `setup` leaves a transaction open (nothing is saved).
   */
  static async createCached<O extends PGliteOptions>(
    key: string,
    setup: (db: PGlite) => Promise<void> | void,
    options?: O,
  ): Promise<PGlite & ExtensionNamespaces<O['extensions']>> {
    if (typeof key !== 'string' || key === '') throw new TypeError('createCached: `key` must be a non-empty string')
    if (typeof setup !== 'function') throw new TypeError('createCached: `setup` must be a function')
    const dataDir: unknown = options?.dataDir
    if (dataDir !== undefined && dataDir !== 'memory://') {
      throw new TypeError(`createCached makes in-memory databases; \`dataDir\` must be 'memory://' or absent, not ${JSON.stringify(dataDir)}`)
    }
    const db = await PGlite.create({ ...options, savedState: key } as O)
    if (db.#engine.opened?.restoredState) return db
    try {
      await setup(db)
      if (db.#engine.inTransaction) throw new Error('createCached: `setup` left a transaction open; commit or roll it back before it returns')
      await db.#engine.exclusive(async (backend, runner) => {
        const save = db.#engine.opened?.saveState
        if (!save || !backend.isSnapshotable) return
        // The array types as they are now (setup may have made enums or composites), so a restore need not ask.
        await save(key, backend, JSON.stringify(db.#engine.registerArrayTypes(runner)))
      })
    } catch (err) {
      await db.close()
      throw err
    }
    return db
  }

  async #init(): Promise<void> {
    const opts = this.#options
    await opts.fs?.init(this, {})
    let addOns: ReadyAddOn[] = []
    const opened = await openInstance({
      options: opts,
      contrib: contribExtensions(opts.extensions),
      setUpAddOns: async () => {
        const { ready, bundles } = await setUpAddOns(this, opts.extensions)
        addOns = ready
        return bundles
      },
      startArgs: (storage, relationBytes) => startArgsForStorage(opts, storage, relationBytes),
      claimDir: (path) => claimDir(path, this, PGlite.#yieldDirOf),
      onLog: this.debug > 0 ? (line: string) => console.debug(`[pgwasm] ${line}`) : undefined,
    })
    this.#engine.open(opened)
    if (addOns.length > 0) await this.#attachAddOns(addOns)
  }

  /** The add-ons' namespaces and `init`s, on the ready instance; one that fails fails the start. */
  async #attachAddOns(ready: readonly ReadyAddOn[]): Promise<void> {
    try {
      await attachAddOns(this, ready, this.#extensionClosers)
    } catch (err) {
      this.#engine.failStart()
      throw err
    }
  }

  /** True once started and until `close()` begins. */
  get ready(): boolean {
    return this.#engine.ready
  }

  /** True after `close()` finished or the engine died. */
  get closed(): boolean {
    return this.#engine.closed
  }

  // Static, so that the claim (held in a process-wide map) keeps no reference
  // to this instance through a closure's scope: one dropped without close()
  // can be collected.
  static #yieldDirOf = (db: PGlite, reason: string): Promise<void> => db.#yieldDir(reason)

  /** Closes this instance for another one of this process that opens its directory. */
  async #yieldDir(reason: string): Promise<void> {
    this.#engine.closeBecause(reason)
    await this.close()
  }

  /**
   * Runs one statement with parameters (extended protocol).
   * @throws {DatabaseError} when Postgres reports an error; the instance stays usable.
   */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>> {
    return this.#engine.exclusiveUnless(options?.signal, (backend, runner) => runQuery<T>(backend, runner, sql, params ?? [], options))
  }

  /** Like {@link query}, from a template: `` db.sql`select * from t where id = ${id}` ``. */
  sql<T = Record<string, unknown>>(strings: TemplateStringsArray, ...params: unknown[]): Promise<Results<T>> {
    const { query, params: values } = templateQuery(strings, ...params)
    return this.query<T>(query, values)
  }

  /**
   * Runs one or more statements without parameters (simple protocol) and
   * returns a result per statement.
   */
  exec(sql: string, options?: QueryOptions): Promise<Results[]> {
    return this.#engine.exclusiveUnless(options?.signal, (backend, runner) => runExec(backend, runner, sql, options))
  }

  /** The parameter and result types of a statement, without running it. */
  describeQuery(sql: string, options?: QueryOptions): Promise<DescribeQueryResult> {
    return this.#engine.exclusive((_b, runner) => runner.describe(sql, options))
  }

  /**
   * Runs `callback` in a transaction that holds the instance: it commits when
   * the callback returns and rolls back when it throws.
   * @throws {DatabaseError} code `25P02` when COMMIT found the transaction aborted.
   */
  transaction<T>(callback: (tx: Transaction) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.#engine.exclusiveUnless(options?.signal, (backend, runner) =>
      runTransaction({ backend, runner, listen: (channel, cb) => this.#listen(runner, channel, cb) }, callback, options?.signal),
    )
  }

  /**
   * Subscribes to a NOTIFY channel (`LISTEN`).
   * @returns a function that unsubscribes this callback.
   */
  listen(channel: string, callback: ChannelListener, tx?: Transaction): Promise<(tx?: Transaction) => Promise<void>> {
    if (tx) return tx.listen(channel, callback)
    return this.#engine.exclusive((_b, runner) => this.#listen(runner, channel, callback))
  }

  #listen(runner: QueryRunner, channel: string, callback: ChannelListener): (tx?: Transaction) => Promise<void> {
    const name = toChannelName(channel)
    this.#engine.notify.add(name, callback)
    try {
      runner.exec(`LISTEN ${channel}`, undefined)
    } catch (err) {
      this.#engine.notify.remove(name, callback)
      throw err
    }
    return (tx?: Transaction) => this.unlisten(channel, callback, tx)
  }

  /** Removes a callback (or every callback) of a channel; `UNLISTEN`s when none is left. */
  async unlisten(channel: string, callback?: ChannelListener, tx?: Transaction): Promise<void> {
    const name = toChannelName(channel)
    if (!this.#engine.notify.remove(name, callback)) return
    if (this.#engine.closing || this.#engine.closed) return
    if (tx) await tx.exec(`UNLISTEN ${channel}`)
    else await this.exec(`UNLISTEN ${channel}`)
  }

  /** Calls `callback` for every notification on any channel this session listens to. */
  onNotification(callback: NotificationListener): () => void {
    this.#engine.notify.addGlobal(callback)
    return () => this.#engine.notify.removeGlobal(callback)
  }

  offNotification(callback: NotificationListener): void {
    this.#engine.notify.removeGlobal(callback)
  }

  /**
   * Runs raw frontend messages and returns every backend message decoded
   * (pg-protocol's classes) with the raw bytes.
   * @throws {ProtocolError} for malformed frames; {@link DatabaseError} for an ErrorResponse unless `throwOnError: false`.
   */
  execProtocol(message: Uint8Array, options: ExecProtocolOptions = {}): Promise<ExecProtocolResult> {
    return this.#engine.exclusive((backend) => this.#engine.protocol.execProtocol(backend, message, options))
  }

  /** Like {@link execProtocol}, returning only the decoded messages. */
  execProtocolStream(message: Uint8Array, options: ExecProtocolOptions = {}): Promise<BackendMessage[]> {
    return this.#engine.exclusive((backend) => this.#engine.protocol.execMessages(backend, message, options, false))
  }

  /**
   * Runs raw frontend messages and returns the backend's bytes untouched.
   * @throws {ProtocolError} for malformed frames; the instance stays usable.
   */
  execProtocolRaw(message: Uint8Array, _options: ExecProtocolOptions = {}): Promise<Uint8Array> {
    return this.#engine.exclusive((backend) => this.#engine.protocol.execRaw(backend, message))
  }

  /**
   * Runs raw frontend messages, handing the backend's bytes to `onRawData`
   * as the engine writes them; nothing is parsed or kept (notifications are
   * still delivered to listeners).
   */
  execProtocolRawStream(message: Uint8Array, options: ExecProtocolStreamOptions): Promise<void> {
    return this.#engine.exclusive((backend) => this.#engine.protocol.execRawStream(backend, message, options.onRawData))
  }

  /**
   * Holds the instance's queue until `release()`: no other call runs in
   * between, so a caller can keep the one backend session across several
   * raw execs (a transaction of a socket client). The lease's exec is the
   * raw-stream path (raw or raw + notify).
   */
  lease(): Promise<EngineLease> {
    return this.#engine.lease()
  }

  /** Runs `fn` while holding the instance's queue (no other call interleaves). */
  runExclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.#engine.exclusive(() => fn())
  }

  /** Re-reads array types from the catalog (after creating types). */
  refreshArrayTypes(): Promise<void> {
    return this.#engine.exclusive((_b, runner) => {
      this.#engine.registerArrayTypes(runner)
    })
  }

  /**
   * Runs every later statement as `role`, for good: it becomes the session
   * user, `RESET SESSION AUTHORIZATION` and `DISCARD ALL` come back to it,
   * and SQL can no longer make another role the session user. The engine's
   * one session starts as the bootstrap superuser, so without this every
   * caller is a superuser; a role without superuser rights cannot read or
   * write server files, load libraries or change server settings.
   * `pgwasm-server --role` does this for its clients.
   * @throws {EngineError} code `BAD_ROLE` when the role is missing, is a
   *   superuser, or the session is in a transaction block, or a different
   *   role is locked already.
   */
  lockSessionUser(role: string): Promise<void> {
    if (typeof role !== 'string' || role === '') return Promise.reject(new TypeError('`role` must be a role name'))
    return this.#engine.exclusive((backend, runner) => lockSessionUser(backend, runner, role))
  }

  /**
   * A new, independent in-memory instance with a copy of this database
   * (taken after a CHECKPOINT).
   */
  clone(): Promise<PGlite> {
    return this.#engine.exclusive((backend, runner) => {
      const options = { ...this.#options, dataDir: undefined, fs: undefined, loadDataTree: undefined, loadDataDir: undefined }
      const ways = {
        memoryCopy: backend.isSnapshotable && this.#options.initialMemory === undefined && !this.#engine.inTransaction,
        filesOnFailure: Object.keys(options.extensions ?? {}).length > 0,
      }
      return cloneDatabase(backend, runner, ways, (source) => PGlite.create({ ...options, ...source }))
    })
  }

  /**
   * Writes a file into the engine's file system (PGlite's `copyToFS`), for
   * SQL that reads server files (`file_fdw`, `pg_read_file`, `COPY FROM`).
   * @param path an absolute path in the engine's file system, e.g. `/tmp/data.csv`
   * @param mode file mode bits @default 0o644
   */
  copyToFS(path: string, data: Uint8Array, mode = 0o644): Promise<void> {
    if (typeof path !== 'string' || !path.startsWith('/')) return Promise.reject(new TypeError('`path` must be an absolute path'))
    if (!(data instanceof Uint8Array)) return Promise.reject(new TypeError('`data` must be a Uint8Array'))
    return this.#engine.exclusive((backend) => backend.writeFile(path, data, mode))
  }

  /**
   * PGlite's `Module`, reduced to what code written for it reads: the
   * engine's memory (`HEAPU8`), e.g. to check `initialMemory`.
   */
  get Module(): { readonly HEAPU8: Uint8Array } {
    const backend = this.#engine.backend
    if (!backend || !this.#engine.started) throw new ClosedError('PGlite is not ready (await waitReady) or is closed')
    return {
      get HEAPU8() {
        return backend.heap
      },
    }
  }

  /**
   * The data directory as a tarball, taken after a CHECKPOINT while no other
   * call runs, so it opens without recovery: a `File` (a `Blob` where `File`
   * is missing) named `<name>.tar.gz` (`application/x-gzip`) or `<name>.tar`
   * (`application/x-tar`). Open it with the `loadDataDir` option, here or in
   * `@electric-sql/pglite`.
   * @param compression `'auto'` (the default) and `'gzip'` compress; `'none'` does not.
   */
  async dumpDataDir(compression: DumpCompression = 'auto'): Promise<File | Blob> {
    const tree = await this.#engine.exclusive((backend, runner) => {
      runner.exec('CHECKPOINT', undefined)
      return backend.readDataTree()
    })
    return packDataDir(tree, dumpName(this.dataDir), compression)
  }

  /**
   * A plain SQL dump of the database, schema and data, that `psql` loads into
   * another PostgreSQL (ownership and privileges left out). Read in one
   * REPEATABLE READ transaction, so it is consistent.
   */
  dumpSql(): Promise<string> {
    return dumpSql(this)
  }

  /** Sizes of internal buffers, for memory tests. Not a stable API. */
  _internalStats(): { rowsHeld: number; scannerBytes: number; rawBufferBytes: number; cachedStatements: number; wasmMemoryBytes: number } {
    const { runner, backend } = this.#engine
    return {
      rowsHeld: runner?.collector.rowsHeld ?? 0,
      scannerBytes: Math.max(runner?.handlerAssemblyBytes ?? 0, this.#engine.protocol.assemblyBytes),
      rawBufferBytes: this.#engine.protocol.rawBufferBytes,
      cachedStatements: runner?.cache.size ?? 0,
      wasmMemoryBytes: backend && !this.#engine.closed ? backend.memoryBytes : 0,
    }
  }

  /** Whether the session is inside a transaction (as of the last request), as PGlite's method. */
  isInTransaction(): boolean {
    return this.#engine.inTransaction
  }

  /**
   * Shuts Postgres down cleanly (shutdown checkpoint) after queued calls
   * finish. A second call returns the same promise; calls made after it
   * reject with {@link ClosedError}.
   */
  close(): Promise<void> {
    this.#closePromise ??= this.#options.extensions ? this.#closeWithExtensions() : this.#close()
    return this.#closePromise
  }

  /** Extensions clean up first, while queries still run; one that fails does not keep the database open. */
  async #closeWithExtensions(): Promise<void> {
    let failure: { error: unknown } | undefined
    try {
      await this.waitReady
      failure = await closeAddOns(this.#extensionClosers)
    } catch {
      // A failed start: #close handles it.
    }
    await this.#close()
    if (failure) throw failure.error
  }

  #close(): Promise<void> {
    return this.#engine.close(this.#options.fs)
  }

  async [asyncDispose](): Promise<void> {
    await this.close()
  }
}

export { ProtocolError, EngineError }

// Fails to compile when the class gains a public member its interface lacks:
// add-ons see the instance through the interface. `_internalStats` is for tests.
type NoneMissing<Missing extends never> = Missing
type PGliteInterfaceComplete = NoneMissing<Exclude<keyof PGlite, keyof PGliteInterface | '_internalStats'>>

/** Maps PGlite's `fs` option to the `dataDir` it stands for; the two must agree. */
function withFsDataDir(opts: PGliteOptions): PGliteOptions {
  if (opts.fs === undefined) return opts
  const dataDir = fsDataDir(opts.fs)
  if (opts.dataDir !== undefined && opts.dataDir !== dataDir) {
    throw new EngineError(`two data directories: \`${opts.dataDir}\` and the \`fs\` option's \`${dataDir}\`; pass one`, { code: 'BAD_DATA_DIR' })
  }
  return { ...opts, dataDir }
}
