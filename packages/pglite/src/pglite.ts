import type { Backend } from './engine/backend.js'
import type { ArrayTypeRow } from './engine/template.js'
import { ClosedError, DatabaseError, EngineError, ProtocolError } from './errors.js'
import { claimDir, resolveDataDirOptions } from './fs/data-dir.js'
import type { ResultCollector } from './protocol/decode.js'
import type { BackendMessage } from './protocol/message-sink.js'
import { stoppable, whileNotAborted, type TransactionOptions } from './query/abort.js'
import { ExecQueue } from './query/queue.js'
import type { DescribeQueryResult, QueryOptions, Results } from './query/results.js'
import { QueryRunner } from './query/runner.js'
import { query as templateQuery } from './query/template.js'
import { NotifyRegistry, toChannelName, type ChannelListener, type NotificationListener } from './notify.js'
import { defaultParsers, defaultSerializers, type Parser, type Serializer } from './types/index.js'
import { BASE_ARGS, startArgsForStorage, type ExtensionNamespaces, type PGliteOptions } from './options.js'
import { fsDataDir } from './fs-compat/filesystem.js'
import { closeAddOns } from './extensions/add-on-closers.js'
import { attachAddOns, setUpAddOns, type ReadyAddOn } from './extensions/add-ons.js'
import { contribExtensions } from './extensions/contrib.js'
import { dumpName, packDataDir, type DumpCompression } from './fs/dump.js'
import { dumpSql } from './dump-sql.js'
import { arrayTypesNote, registerArrayTypes } from './instance/array-types.js'
import { cloneDatabase } from './instance/clone.js'
import { endEngine } from './instance/engine-close.js'
import { lockSessionUser } from './instance/session-user.js'
import { takeLease } from './instance/engine-lease.js'
import { deathError, restartFailure, startAgain } from './instance/engine-restart.js'
import { ProtocolExec } from './instance/protocol-exec.js'
import { runExec, runQuery } from './instance/query-calls.js'
import { quoteIdent } from './instance/quote-ident.js'
import { runTransaction } from './instance/transaction-handle.js'
import { openInstance, type OpenedInstance } from './instance/open-instance.js'
import type { ExecProtocolOptions, ExecProtocolResult, ExecProtocolStreamOptions } from './exec-protocol-types.js'
import type { EngineLease } from './lease-types.js'
import type { Transaction } from './transaction-types.js'

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
export class PGlite implements AsyncDisposable {
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
  readonly #queue = new ExecQueue()
  readonly #notify = new NotifyRegistry()
  #backend: Backend | undefined
  #runner: QueryRunner | undefined
  /** How the engine was started: its storage, how it starts again, how its state is saved. */
  #opened: OpenedInstance | undefined
  #ready = false
  #closing = false
  /** Why the instance was closed when it was not its owner's close(). */
  #closedBecause: string | undefined
  #closed = false
  #closePromise: Promise<void> | undefined
  /** How many times the engine was started again after it died. */
  #restarts = 0
  #inTransaction = false
  readonly #extensionClosers: (() => Promise<void>)[] = []
  readonly #protocol = new ProtocolExec(this.#notify, () => this.#runner)

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
   * along, as with `clone()`. A database that cannot be snapshotted (with
   * contrib `extensions`, `initialMemory`, or a side module that `setup`
   * loaded) is made by `setup` every time.
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
    if (db.#opened?.restoredState) return db
    try {
      await setup(db)
      if (db.#inTransaction) throw new Error('createCached: `setup` left a transaction open; commit or roll it back before it returns')
      await db.#exclusive(async (backend, runner) => {
        const save = db.#opened?.saveState
        if (!save || !backend.isSnapshotable) return
        // The array types as they are now (setup may have made enums or composites), so a restore need not ask.
        await save(key, backend, JSON.stringify(db.#registerArrayTypes(runner)))
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
    this.#opened = opened
    const runner = this.#attach(opened.backend)
    // A copy inherits the source's prepared statements; its cache starts empty.
    if (opened.copied) runner.exec('DEALLOCATE ALL', undefined)
    this.#setRole(runner)
    opened.learnArrayTypes(this.#registerArrayTypes(runner, opened.knownArrayTypes))
    this.#ready = true
    if (addOns.length > 0) await this.#attachAddOns(addOns)
  }

  /** Makes `backend` the instance's engine, with a new query runner for it. */
  #attach(backend: Backend): QueryRunner {
    const opts = this.#options
    this.#backend = backend
    backend.memoryLimit = opts.maxMemory
    this.#runner = new QueryRunner(
      backend,
      { afterExec: (c, o) => this.#afterExec(c, o) },
      this.parsers,
      this.serializers,
      opts.statementCache === false ? 0 : (opts.statementCache ?? 100),
      opts.serializers !== undefined && Object.keys(opts.serializers).length > 0,
    )
    return this.#runner
  }

  #setRole(runner: QueryRunner): void {
    const { username } = this.#options
    if (username && username !== 'postgres') runner.exec(`SET ROLE ${quoteIdent(username)}`, undefined)
  }

  /**
   * After the engine died under a directory or idb:// database: Postgres
   * starts again on what is stored (crash recovery replays the WAL, so every
   * committed transaction is kept) and the instance goes on with a new session, set up
   * as the old one was at its start, with the same `listen()` channels and
   * locked session user. Anything else, or a failed new start, closes the
   * instance. Returns the error that reports the death to the call that
   * met it. Runs in the queue; a second call for the same death does nothing.
   */
  async #afterDeath(dead: Backend): Promise<EngineError> {
    if (this.#backend === dead && !this.#closed) {
      const restart = this.#opened?.restart
      if (restart && !this.#closing) {
        try {
          await startAgain(dead, { restart, adopt: (backend) => this.#adopt(backend), channels: this.#notify.channels })
          this.#inTransaction = false
          this.#restarts++
        } catch (err) {
          this.#closedBecause ??= restartFailure(err)
          this.#markDead()
        }
      } else {
        this.#markDead()
      }
    }
    return this.#deathError(dead)
  }

  /** A new engine after a death, its session as the old one's was at its start. */
  #adopt(backend: Backend): QueryRunner {
    const runner = this.#attach(backend)
    this.#setRole(runner)
    this.#registerArrayTypes(runner)
    return runner
  }

  #deathError(dead: Backend, pending = false): EngineError {
    return deathError(dead, {
      dataDir: this.dataDir,
      restartable: this.#opened?.restart !== undefined,
      pending,
      replaced: !this.#closed && this.#backend !== dead,
      closedBecause: this.#closedBecause,
    })
  }

  /** The add-ons' namespaces and `init`s, on the ready instance; one that fails fails the start. */
  async #attachAddOns(ready: readonly ReadyAddOn[]): Promise<void> {
    try {
      await attachAddOns(this, ready, this.#extensionClosers)
    } catch (err) {
      this.#ready = false
      try {
        this.#backend?.shutdown()
      } finally {
        this.#closed = true
        this.#opened?.releaseDir?.()
      }
      throw err
    }
  }

  /** Adds parsers and serializers for the catalog's array types (`known`: skip the query). Returns the rows used. */
  #registerArrayTypes(runner: QueryRunner, known?: readonly ArrayTypeRow[]): readonly ArrayTypeRow[] {
    return registerArrayTypes(runner, this.parsers, this.serializers, known)
  }

  #afterExec(collector: ResultCollector, options: QueryOptions | undefined): void {
    if (collector.notices && options?.onNotice) for (const n of collector.notices) options.onNotice(n)
    if (collector.notifications) this.#notify.dispatch(collector.notifications)
    this.#inTransaction = collector.txStatus !== 0x49
  }

  /** Why a call on a closed instance fails: the engine's death, when that closed it. */
  #closedFailure(): Error {
    const backend = this.#backend
    return backend?.deadError ? this.#deathError(backend) : this.#closedError()
  }

  #closedError(): ClosedError {
    return this.#closedBecause ? new ClosedError(`PGlite is closed: ${this.#closedBecause}`) : new ClosedError()
  }

  /** True once started and until `close()` begins. */
  get ready(): boolean {
    return this.#ready && !this.#closing && !this.#closed
  }

  /** True after `close()` finished or the engine died. */
  get closed(): boolean {
    return this.#closed
  }

  /** Waits until the instance is started; rejects once it is closing or closed. The engine itself is taken in the queue. */
  async #started(): Promise<void> {
    if (this.#closing || this.#closed) throw this.#closedFailure()
    if (!this.#ready) await this.waitReady
  }

  // Static, so that the claim (held in a process-wide map) keeps no reference
  // to this instance through a closure's scope: one dropped without close()
  // can be collected.
  static #yieldDirOf = (db: PGlite, reason: string): Promise<void> => db.#yieldDir(reason)

  /** Closes this instance for another one of this process that opens its directory. */
  async #yieldDir(reason: string): Promise<void> {
    this.#closedBecause ??= reason
    await this.close()
  }

  /**
   * Runs `job` on the engine in the queue, with the engine of its turn (a
   * directory database may have started a new one meanwhile). If the engine
   * died, the instance starts it again or closes (see `#afterDeath`).
   */
  async #exclusive<T>(job: (backend: Backend, runner: QueryRunner) => Promise<T> | T): Promise<T> {
    await this.#started()
    return this.#queue.run(async () => {
      if (this.#closed) throw this.#closedFailure()
      const backend = this.#backend!
      try {
        return await job(backend, this.#runner!)
      } catch (err) {
        if (backend.deadError) throw await this.#afterDeath(backend)
        throw err
      } finally {
        // A commit is in IndexedDB before its promise resolves (idb:// only).
        const persistence = this.#opened?.store?.current
        if (persistence && !backend.deadError && !backend.inTransaction) await persistence.flush()
      }
    })
  }

  /**
   * {@link #exclusive}, stopped by `signal` (query/abort.ts): before its
   * turn, or where the engine polls while it runs. Without a signal the
   * call costs what it always did: no wrapper, no extra promise.
   */
  #exclusiveUnless<T>(signal: AbortSignal | undefined, job: (backend: Backend, runner: QueryRunner) => Promise<T>): Promise<T> {
    if (!signal) return this.#exclusive(job)
    return stoppable(signal, (stopped) => this.#exclusive((backend, runner) => stopped() ?? whileNotAborted(backend, signal, () => job(backend, runner))))
  }

  #markDead(): void {
    this.#closed = true
    this.#ready = false
    void this.#opened?.releaseDir?.()
    this.#notify.clear()
  }

  /**
   * Runs one statement with parameters (extended protocol).
   * @throws {DatabaseError} when Postgres reports an error; the instance stays usable.
   */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>> {
    return this.#exclusiveUnless(options?.signal, (backend, runner) => runQuery<T>(backend, runner, sql, params ?? [], options))
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
    return this.#exclusiveUnless(options?.signal, (backend, runner) => runExec(backend, runner, sql, options))
  }

  /** The parameter and result types of a statement, without running it. */
  describeQuery(sql: string, options?: QueryOptions): Promise<DescribeQueryResult> {
    return this.#exclusive((_b, runner) => runner.describe(sql, options))
  }

  /**
   * Runs `callback` in a transaction that holds the instance: it commits when
   * the callback returns and rolls back when it throws.
   * @throws {DatabaseError} code `25P02` when COMMIT found the transaction aborted.
   */
  transaction<T>(callback: (tx: Transaction) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.#exclusiveUnless(options?.signal, (backend, runner) =>
      runTransaction({ backend, runner, listen: (channel, cb) => this.#listen(runner, channel, cb) }, callback, options?.signal),
    )
  }

  /**
   * Subscribes to a NOTIFY channel (`LISTEN`).
   * @returns a function that unsubscribes this callback.
   */
  listen(channel: string, callback: ChannelListener, tx?: Transaction): Promise<(tx?: Transaction) => Promise<void>> {
    if (tx) return tx.listen(channel, callback)
    return this.#exclusive((_b, runner) => this.#listen(runner, channel, callback))
  }

  #listen(runner: QueryRunner, channel: string, callback: ChannelListener): (tx?: Transaction) => Promise<void> {
    const name = toChannelName(channel)
    this.#notify.add(name, callback)
    try {
      runner.exec(`LISTEN ${channel}`, undefined)
    } catch (err) {
      this.#notify.remove(name, callback)
      throw err
    }
    return (tx?: Transaction) => this.unlisten(channel, callback, tx)
  }

  /** Removes a callback (or every callback) of a channel; `UNLISTEN`s when none is left. */
  async unlisten(channel: string, callback?: ChannelListener, tx?: Transaction): Promise<void> {
    const name = toChannelName(channel)
    if (!this.#notify.remove(name, callback)) return
    if (this.#closing || this.#closed) return
    if (tx) await tx.exec(`UNLISTEN ${channel}`)
    else await this.exec(`UNLISTEN ${channel}`)
  }

  /** Calls `callback` for every notification on any channel this session listens to. */
  onNotification(callback: NotificationListener): () => void {
    this.#notify.addGlobal(callback)
    return () => this.#notify.removeGlobal(callback)
  }

  offNotification(callback: NotificationListener): void {
    this.#notify.removeGlobal(callback)
  }

  /**
   * Runs raw frontend messages and returns every backend message decoded
   * (pg-protocol's classes) with the raw bytes.
   * @throws {ProtocolError} for malformed frames; {@link DatabaseError} for an ErrorResponse unless `throwOnError: false`.
   */
  execProtocol(message: Uint8Array, options: ExecProtocolOptions = {}): Promise<ExecProtocolResult> {
    return this.#exclusive((backend) => this.#protocol.execProtocol(backend, message, options))
  }

  /** Like {@link execProtocol}, returning only the decoded messages. */
  execProtocolStream(message: Uint8Array, options: ExecProtocolOptions = {}): Promise<BackendMessage[]> {
    return this.#exclusive((backend) => this.#protocol.execMessages(backend, message, options, false))
  }

  /**
   * Runs raw frontend messages and returns the backend's bytes untouched.
   * @throws {ProtocolError} for malformed frames; the instance stays usable.
   */
  execProtocolRaw(message: Uint8Array, _options: ExecProtocolOptions = {}): Promise<Uint8Array> {
    return this.#exclusive((backend) => this.#protocol.execRaw(backend, message))
  }

  /**
   * Runs raw frontend messages, handing the backend's bytes to `onRawData`
   * as the engine writes them; nothing is parsed or kept (notifications are
   * still delivered to listeners).
   */
  execProtocolRawStream(message: Uint8Array, options: ExecProtocolStreamOptions): Promise<void> {
    return this.#exclusive((backend) => this.#protocol.execRawStream(backend, message, options.onRawData))
  }

  /**
   * Holds the instance's queue until `release()`: no other call runs in
   * between, so a caller can keep the one backend session across several
   * raw execs (a transaction of a socket client). The lease's exec is the
   * raw-stream path (raw or raw + notify).
   */
  async lease(): Promise<EngineLease> {
    await this.#started()
    const db = this
    return takeLease({
      queue: this.#queue,
      notify: this.#notify,
      protocol: this.#protocol,
      get closed() {
        return db.#closed
      },
      get backend() {
        return db.#backend!
      },
      get restarts() {
        return db.#restarts
      },
      closedFailure: () => this.#closedFailure(),
      afterDeath: (dead) => this.#afterDeath(dead),
      diedUnderLease: (dead) => {
        if (!this.#opened?.restart) this.#markDead()
        return this.#deathError(dead, true)
      },
    })
  }

  /** Runs `fn` while holding the instance's queue (no other call interleaves). */
  runExclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.#exclusive(() => fn())
  }

  /** Re-reads array types from the catalog (after creating types). */
  refreshArrayTypes(): Promise<void> {
    return this.#exclusive((_b, runner) => {
      this.#registerArrayTypes(runner)
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
    return this.#exclusive((backend, runner) => lockSessionUser(backend, runner, role))
  }

  /**
   * A new, independent in-memory instance with a copy of this database
   * (taken after a CHECKPOINT).
   */
  clone(): Promise<PGlite> {
    return this.#exclusive((backend, runner) => {
      const options = { ...this.#options, dataDir: undefined, fs: undefined, loadDataTree: undefined, loadDataDir: undefined }
      const ways = {
        memoryCopy: backend.isSnapshotable && this.#options.initialMemory === undefined && !this.#inTransaction,
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
    return this.#exclusive((backend) => backend.writeFile(path, data, mode))
  }

  /**
   * PGlite's `Module`, reduced to what code written for it reads: the
   * engine's memory (`HEAPU8`), e.g. to check `initialMemory`.
   */
  get Module(): { readonly HEAPU8: Uint8Array } {
    const backend = this.#backend
    if (!backend || !this.#ready) throw new ClosedError('PGlite is not ready (await waitReady) or is closed')
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
    const tree = await this.#exclusive((backend, runner) => {
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
    const runner = this.#runner
    return {
      rowsHeld: runner?.collector.rowsHeld ?? 0,
      scannerBytes: Math.max(runner?.handlerAssemblyBytes ?? 0, this.#protocol.assemblyBytes),
      rawBufferBytes: this.#protocol.rawBufferBytes,
      cachedStatements: runner?.cache.size ?? 0,
      wasmMemoryBytes: this.#backend && !this.#closed ? this.#backend.memoryBytes : 0,
    }
  }

  /** Whether the session is inside a transaction (as of the last request), as PGlite's method. */
  isInTransaction(): boolean {
    return this.#inTransaction
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

  async #close(): Promise<void> {
    this.#closing = true
    try {
      await this.waitReady
    } catch {
      this.#closed = true
      return
    }
    await this.#queue.run(async () => {
      try {
        const backend = this.#backend
        const stored = this.#opened?.releaseDir !== undefined
        if (backend) endEngine(backend, { stored, fsOption: !!this.#options.fs, note: () => this.#closingNote() })
      } finally {
        this.#closed = true
        this.#ready = false
        this.#notify.clear()
        this.#runner = undefined
        await this.#opened?.releaseDir?.()
        await this.#options.fs?.closeFs()
      }
    })
  }

  /**
   * For a directory, the catalog's array types as the close leaves them, so
   * the next open skips that query. None inside a transaction block (its
   * types are rolled back) or when the query fails.
   */
  #closingNote(): string | undefined {
    const runner = this.#runner
    if (!this.#opened?.onDisk || this.#inTransaction || !runner || this.#backend?.deadError) return undefined
    return arrayTypesNote(runner)
  }

  async [asyncDispose](): Promise<void> {
    await this.close()
  }
}

export { ProtocolError, EngineError }

/** Maps PGlite's `fs` option to the `dataDir` it stands for; the two must agree. */
function withFsDataDir(opts: PGliteOptions): PGliteOptions {
  if (opts.fs === undefined) return opts
  const dataDir = fsDataDir(opts.fs)
  if (opts.dataDir !== undefined && opts.dataDir !== dataDir) {
    throw new EngineError(`two data directories: \`${opts.dataDir}\` and the \`fs\` option's \`${dataDir}\`; pass one`, { code: 'BAD_DATA_DIR' })
  }
  return { ...opts, dataDir }
}
