import { loadAssets, locateEngine, prefetchBundledTemplate } from './engine/assets.js'
import { Backend, type DataDirMount } from './engine/backend.js'
import type { DataTree } from './engine/pgdata-tree.js'
import type { PostgresModule } from './engine/emscripten.js'
import { ARRAY_TYPES_SQL, getTemplate, knownArrayTypes, rememberArrayTypes, templateKey, type ArrayTypeRow } from './engine/template.js'
import { prefetchSnapshot, recycleBackend, restoreCopy, startInMemory } from './engine/starter.js'
import { ClosedError, DatabaseError, EngineError, ProtocolError } from './errors.js'
import { claimDir, parseDataDir } from './fs/data-dir.js'
import { FRONTEND_TYPES, Frontend } from './protocol/codes.js'
import type { ResultCollector } from './protocol/decode.js'
import { validateFrontendFrames, validateStartupPacket } from './protocol/frames.js'
import { ParsedHandler, RawAccumulator, RawHandler, RawNotifyHandler, type ProtocolHandler } from './protocol/handlers.js'
import { MessageSink, type BackendMessage } from './protocol/message-sink.js'
import type { Notification } from './protocol/messages.js'
import { ExecQueue } from './query/queue.js'
import type { DescribeQueryResult, QueryOptions, Results } from './query/results.js'
import { QueryRunner } from './query/runner.js'
import { query as templateQuery } from './query/template.js'
import { NotifyRegistry, toChannelName, type ChannelListener, type NotificationListener } from './notify.js'
import { defaultParsers, defaultSerializers, makeArrayParser, serializeArray, type Parser, type Serializer } from './types/index.js'
import { IDB_ARGS, startArgsFor, type ExtensionNamespaces, type PGliteOptions } from './options.js'
import type { IdbPersistence } from './fs/idb-persistence.js'
import { contribExtensions, installContrib, isContribExtension, withPreloadLibraries } from './extensions/contrib.js'
import { dumpName, packDataDir, readDataDirArchive, type DumpCompression } from './fs/dump.js'
import { dumpSql } from './dump-sql.js'

export type { PGliteOptions }

/** Options of `execProtocol`, `execProtocolStream`, `execProtocolRaw`. */
export interface ExecProtocolOptions {
  /** Throw the first ErrorResponse as a {@link DatabaseError} (default true; `execProtocol` only). */
  throwOnError?: boolean
  onNotice?: (notice: import('./query/results.js').Notice) => void
  /** Accepted for PGlite compatibility; on-disk writes in Node are synchronous. */
  syncToFs?: boolean
}

export interface ExecProtocolStreamOptions {
  /** Receives backend bytes as the engine writes them; the view is valid only during the call. */
  onRawData: (data: Uint8Array) => void
  syncToFs?: boolean
}

export interface ExecProtocolResult {
  messages: BackendMessage[]
  data: Uint8Array
}

/** Exclusive use of the engine, from {@link PGlite.lease}. */
export interface EngineLease {
  /**
   * Runs whole frontend frames (the caller checked them) and hands the
   * backend bytes to `onRawData`, synchronously. Throws {@link EngineError}
   * if the engine died.
   */
  execProtocolRawStream(message: Uint8Array, onRawData: (bytes: Uint8Array) => void): void
  /** Whether the backend session is inside a transaction block. */
  readonly inTransaction: boolean
  /** Channels this instance's own `listen()` callbacks need LISTENed on the backend. */
  readonly listeningChannels: readonly string[]
  /** Whether other calls wait for the instance (a holder of many turns should let them run). */
  readonly othersWaiting: boolean
  /** Lets queued calls run again. Idempotent. */
  release(): void
}

/** The transaction handle passed to {@link PGlite.transaction}'s callback. */
export interface Transaction {
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>>
  sql<T = Record<string, unknown>>(strings: TemplateStringsArray, ...params: unknown[]): Promise<Results<T>>
  exec(sql: string, options?: QueryOptions): Promise<Results[]>
  /** Rolls back now; the callback's return value is still returned. */
  rollback(): Promise<void>
  listen(channel: string, callback: ChannelListener): Promise<(tx?: Transaction) => Promise<void>>
  readonly closed: boolean
}

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
  #releaseDir: (() => Promise<void>) | undefined
  /** An `idb://` database's writer to IndexedDB. */
  #persistence: IdbPersistence | undefined
  #ready = false
  #closing = false
  #closed = false
  #closePromise: Promise<void> | undefined
  #inTransaction = false
  readonly #extensionClosers: (() => Promise<void>)[] = []
  // Made once; re-armed per exec (no per-exec closures on the hot path).
  readonly #messageSink = new MessageSink()
  readonly #messageHandler = new ParsedHandler(this.#messageSink)
  readonly #raw = new RawHandler()
  readonly #rawNotify = new RawNotifyHandler()
  readonly #accumulator = new RawAccumulator()

  /**
   * @param dataDir `memory://` or nothing for an in-memory database; a path
   *   or `file://` path for a directory (Node).
   */
  constructor(dataDir?: string | PGliteOptions, options?: PGliteOptions) {
    const opts: PGliteOptions = typeof dataDir === 'object' ? dataDir : { ...options, dataDir: dataDir ?? options?.dataDir }
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

  async #init(): Promise<void> {
    const opts = this.#options
    const spec = parseDataDir(opts.dataDir)
    const templateOptions = { initdbArgs: opts.initdbArgs, cacheDir: opts.templateCacheDir }
    const username = opts.username ?? 'postgres'
    const database = opts.database ?? 'postgres'
    const assetsLoading = loadAssets({ assetBaseUrl: opts.assetBaseUrl })
    // Contrib side modules are instantiated before Postgres starts: such a
    // backend can neither come from nor leave a start-up snapshot.
    const contrib = contribExtensions(opts.extensions)
    const bootOnly = contrib.length > 0 || opts.loadDataDir !== undefined
    if (spec.kind === 'memory' && opts.assetBaseUrl === undefined && !opts.loadDataTree && !opts.cloneOf && opts.initialMemory === undefined && !bootOnly) {
      // Read a cached snapshot while the engine compiles.
      const { engineVersion } = await locateEngine()
      void prefetchSnapshot({
        treeKey: templateKey({ engineVersion }, templateOptions),
        username,
        database,
        startArgs: startArgsFor(opts, true),
        cacheDir: opts.templateCacheDir,
      }).then((snapshot) => {
        // No snapshot: Postgres boots from the template, so unpack it meanwhile.
        if (!snapshot && !opts.initdbArgs?.length) prefetchBundledTemplate({ assetBaseUrl: opts.assetBaseUrl })
      })
    }
    const archiveReading = opts.loadDataDir === undefined ? undefined : readDataDirArchive(opts.loadDataDir)
    // An idb:// database is read from IndexedDB while the engine compiles.
    const idbOpening =
      spec.kind === 'idb'
        ? import('./fs/idb-persistence.js').then(({ IdbPersistence }) =>
            IdbPersistence.open(spec.name, {
              relaxed: opts.relaxedDurability === true,
              engineVersion: assetsLoading.then((a) => a.engineVersion),
              create: async () => {
                const [a, archive] = await Promise.all([assetsLoading, archiveReading])
                return opts.loadDataTree ?? archive ?? (await getTemplate(a, templateOptions))
              },
            }),
          )
        : undefined
    idbOpening?.catch(() => {})
    let assets: Awaited<typeof assetsLoading>
    let loadedTree: Awaited<typeof archiveReading>
    try {
      ;[assets, loadedTree] = await Promise.all([assetsLoading, archiveReading])
    } catch (err) {
      // The store may open anyway: let go of it and its lock.
      await idbOpening?.then((o) => o.persistence.close()).catch(() => {})
      throw err
    }
    const loadTree = opts.loadDataTree ?? loadedTree
    let mount: DataDirMount
    let createdInStore = false
    if (spec.kind === 'idb') {
      const opened = await idbOpening!
      createdInStore = opened.created
      if (loadTree && !opened.created) {
        await opened.persistence.close()
        throw new EngineError(`loadDataDir: idb://${spec.name} already holds a database; load into a new name`, { code: 'BAD_DATA_DIR' })
      }
      this.#persistence = opened.persistence
      this.#releaseDir = async () => {
        this.#persistence = undefined
        await opened.persistence.close()
      }
      mount = { kind: 'memory', tree: opened.tree }
    } else if (opts.cloneOf) {
      mount = { kind: 'memory', tree: [] }
    } else if (loadTree && spec.kind === 'memory') {
      mount = { kind: 'memory', tree: loadTree }
    } else if (spec.kind === 'memory') {
      // Loaded only if Postgres must boot: a snapshot restore needs no template.
      mount = { kind: 'memory', tree: bootOnly ? await getTemplate(assets, templateOptions) : [] }
    } else {
      const { resolve } = await import('node:path')
      const path = resolve(spec.path)
      const releaseClaim = claimDir(path)
      try {
        const { prepareNodeDataDir } = await import('./fs/node-dir.js')
        const { created, unlock } = await prepareNodeDataDir(path, loadTree ? async () => loadTree : () => getTemplate(assets, templateOptions))
        if (loadTree && !created) {
          await unlock()
          throw new EngineError(`loadDataDir: the data directory ${path} already holds a database; load into an empty directory`, {
            code: 'BAD_DATA_DIR',
          })
        }
        this.#releaseDir = async () => {
          releaseClaim()
          await unlock()
        }
      } catch (err) {
        releaseClaim()
        throw err
      }
      mount = { kind: 'node', path }
    }
    let backend: Backend
    const onLog = this.debug > 0 ? (line: string) => console.debug(`[pgwasm] ${line}`) : undefined
    try {
      if (opts.cloneOf) {
        backend = await restoreCopy(assets, opts.cloneOf, onLog)
      } else {
        const backendOptions = {
          mount,
          username,
          database,
          startArgs: withPreloadLibraries(
            spec.kind === 'idb' && !opts.startParams ? [...startArgsFor(opts, false), ...IDB_ARGS] : startArgsFor(opts, mount.kind === 'memory'),
            contrib,
          ),
          initialMemory: opts.initialMemory,
          onLog,
          prepare: contrib.length > 0 ? (mod: PostgresModule) => installContrib(mod, contrib) : undefined,
          afterMount: this.#persistence ? (mod: PostgresModule) => this.#persistence?.attach(mod) : undefined,
        }
        backend =
          mount.kind === 'memory' && !loadTree && !bootOnly && spec.kind === 'memory'
            ? await startInMemory(assets, {
                ...backendOptions,
                treeKey: templateKey(assets, templateOptions),
                loadTree: () => getTemplate(assets, templateOptions),
                cacheDir: opts.templateCacheDir,
              })
            : await Backend.start(assets, backendOptions)
      }
    } catch (err) {
      await this.#releaseDir?.()
      throw err
    }
    this.#backend = backend
    const runner = new QueryRunner(
      backend,
      { afterExec: (c, o) => this.#afterExec(c, o) },
      this.parsers,
      this.serializers,
      opts.statementCache === false ? 0 : (opts.statementCache ?? 100),
      opts.serializers !== undefined && Object.keys(opts.serializers).length > 0,
    )
    this.#runner = runner
    // A copy inherits the source's prepared statements; its cache starts empty.
    if (opts.cloneOf) runner.exec('DEALLOCATE ALL', undefined)
    if (opts.username && opts.username !== 'postgres') runner.exec(`SET ROLE ${quoteIdent(opts.username)}`, undefined)
    // A database nothing ran in yet has the template's catalog: its array types may be known.
    const fresh = !bootOnly && !loadTree && !opts.cloneOf && (spec.kind === 'memory' || (spec.kind === 'idb' && createdInStore))
    const known = fresh ? knownArrayTypes(assets, templateOptions) : undefined
    const arrayTypes = this.#registerArrayTypes(runner, known)
    if (fresh && !known) rememberArrayTypes(assets, templateOptions, arrayTypes)
    this.#ready = true
    if (opts.extensions) await this.#setupExtensions(opts.extensions)
  }

  /** Extensions query the ready instance; one that fails to set up fails the start. */
  async #setupExtensions(extensions: NonNullable<PGliteOptions['extensions']>): Promise<void> {
    try {
      for (const [key, extension] of Object.entries(extensions)) {
        if (isContribExtension(extension)) continue
        if (key in this) throw new TypeError(`extension key \`${key}\` would hide a PGlite member`)
        const { namespaceObj, close } = await extension.setup(this)
        if (namespaceObj !== undefined) Object.defineProperty(this, key, { value: namespaceObj, enumerable: true })
        if (close) this.#extensionClosers.push(close)
      }
    } catch (err) {
      this.#ready = false
      try {
        this.#backend?.shutdown()
      } finally {
        this.#closed = true
        this.#releaseDir?.()
      }
      throw err
    }
  }

  /** Adds parsers and serializers for the catalog's array types (`known`: skip the query). Returns the rows used. */
  #registerArrayTypes(runner: QueryRunner, known?: readonly ArrayTypeRow[]): readonly ArrayTypeRow[] {
    const rows = known ?? (runner.query(ARRAY_TYPES_SQL, [], { rowMode: 'array' }).rows as unknown as ArrayTypeRow[])
    for (const row of rows) {
      const [elem, arr, delim] = row
      if (!this.parsers[arr]) this.parsers[arr] = makeArrayParser(this.parsers[elem], elem, delim)
      if (!this.serializers[arr]) {
        const element = this.serializers[elem]
        this.serializers[arr] = (value: unknown) =>
          Array.isArray(value) ? serializeArray(value, element, delim) : String(value)
      }
    }
    runner.parsersChanged()
    return rows
  }

  #afterExec(collector: ResultCollector, options: QueryOptions | undefined): void {
    if (collector.notices && options?.onNotice) for (const n of collector.notices) options.onNotice(n)
    if (collector.notifications) this.#notify.dispatch(collector.notifications)
    this.#inTransaction = collector.txStatus !== 0x49
  }

  /** True once started and until `close()` begins. */
  get ready(): boolean {
    return this.#ready && !this.#closing && !this.#closed
  }

  /** True after `close()` finished or the engine died. */
  get closed(): boolean {
    return this.#closed
  }

  async #engine(): Promise<{ backend: Backend; runner: QueryRunner }> {
    if (this.#closing || this.#closed) throw this.#backend?.deadError ?? new ClosedError()
    if (!this.#ready) await this.waitReady
    return { backend: this.#backend!, runner: this.#runner! }
  }

  /** Runs `job` on the engine in the queue; marks the instance closed if the engine died. */
  async #exclusive<T>(job: (backend: Backend, runner: QueryRunner) => Promise<T> | T): Promise<T> {
    const { backend, runner } = await this.#engine()
    return this.#queue.run(async () => {
      if (this.#closed) throw backend.deadError ?? new ClosedError()
      try {
        return await job(backend, runner)
      } catch (err) {
        if (backend.deadError) this.#markDead()
        throw err
      } finally {
        // A commit is in IndexedDB before its promise resolves (idb:// only).
        if (this.#persistence && !backend.deadError && !backend.inTransaction) await this.#persistence.flush()
      }
    })
  }

  #markDead(): void {
    this.#closed = true
    this.#ready = false
    void this.#releaseDir?.()
    this.#notify.clear()
  }

  /**
   * Runs one statement with parameters (extended protocol).
   * @throws {DatabaseError} when Postgres reports an error; the instance stays usable.
   */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>> {
    return this.#exclusive((_b, runner) => this.#runQuery<T>(runner, sql, params ?? [], options))
  }

  async #runQuery<T>(runner: QueryRunner, sql: string, params: readonly unknown[], options: QueryOptions | undefined): Promise<Results<T>> {
    if (options?.blob) await this.#feedBlob(options.blob)
    try {
      return this.#attachWrittenBlob(runner.query(sql, params, options)) as Results<T>
    } finally {
      this.#endBlob()
    }
  }

  async #runExec(runner: QueryRunner, sql: string, options: QueryOptions | undefined): Promise<Results[]> {
    if (options?.blob) await this.#feedBlob(options.blob)
    try {
      const results = runner.exec(sql, options) as Results[]
      this.#attachWrittenBlob(results[results.length - 1]!)
      return results
    } finally {
      this.#endBlob()
    }
  }

  /** Input for `COPY ... FROM '/dev/blob'` during one call. */
  async #feedBlob(blob: Blob): Promise<void> {
    this.#backend!.blob.setInput(new Uint8Array(await blob.arrayBuffer()))
  }

  /** What `COPY ... TO '/dev/blob'` wrote during the call becomes `result.blob`. */
  #attachWrittenBlob<R extends object>(result: R): R {
    const written = this.#backend!.blob.takeOutput()
    if (written) Object.assign(result, { blob: new Blob(written as BlobPart[]) })
    return result
  }

  #endBlob(): void {
    const blob = this.#backend?.blob
    if (!blob) return
    blob.setInput(undefined)
    // Output of a failed call must not reach the next one.
    blob.takeOutput()
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
    return this.#exclusive((_b, runner) => this.#runExec(runner, sql, options))
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
  transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.#exclusive(async (_backend, runner) => {
      runner.exec('BEGIN', undefined)
      const txQueue = new ExecQueue()
      let closed = false
      const check = (): void => {
        if (closed) throw new ClosedError('the transaction is closed')
      }
      const tx: Transaction = {
        query: (sql, params, options) =>
          txQueue.run(() => {
            check()
            return this.#runQuery(runner, sql, params ?? [], options)
          }),
        sql: (strings, ...params) => {
          const { query, params: values } = templateQuery(strings, ...params)
          return tx.query(query, values)
        },
        exec: (sql, options) =>
          txQueue.run(() => {
            check()
            return this.#runExec(runner, sql, options)
          }),
        rollback: () =>
          txQueue.run(() => {
            check()
            runner.exec('ROLLBACK', undefined)
            closed = true
          }),
        listen: (channel, cb) =>
          txQueue.run(() => {
            check()
            return this.#listen(runner, channel, cb)
          }),
        get closed() {
          return closed
        },
      }
      try {
        const result = await callback(tx)
        await txQueue.run(() => {
          if (closed) return
          closed = true
          const [commit] = runner.exec('COMMIT', undefined)
          if (commit?.command === 'ROLLBACK') {
            throw new DatabaseError('the transaction was rolled back because a statement in it failed', {
              code: '25P02',
              severity: 'ERROR',
            })
          }
        })
        return result
      } catch (err) {
        if (!closed) {
          closed = true
          if (!this.#backend?.deadError) runner.exec('ROLLBACK', undefined)
        }
        throw err
      }
    })
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
   * Validates raw input before the engine sees it and says what it is. Also
   * remembers whether it left an extended-protocol sequence without its Sync:
   * Postgres would skip the next query's messages up to a Sync, so the next
   * parsed call sends one first.
   */
  #checkInput(message: Uint8Array): 'terminate' | 'startup' | 'frames' {
    if (isTerminate(message)) return 'terminate'
    if (message.length > 0 && message[0] === 0) {
      validateStartupPacket(message)
      return 'startup'
    }
    const unsynced = validateFrontendFrames(message, FRONTEND_TYPES)
    if (this.#runner) this.#runner.pendingSync = unsynced
    return 'frames'
  }

  /**
   * Runs raw frontend messages and returns every backend message decoded
   * (pg-protocol's classes) with the raw bytes.
   * @throws {ProtocolError} for malformed frames; {@link DatabaseError} for an ErrorResponse unless `throwOnError: false`.
   */
  execProtocol(message: Uint8Array, options: ExecProtocolOptions = {}): Promise<ExecProtocolResult> {
    return this.#exclusive((backend) => {
      const messages = this.#execMessages(backend, message, options, true)
      return { messages, data: this.#accumulator.take() }
    })
  }

  /** Like {@link execProtocol}, returning only the decoded messages. */
  execProtocolStream(message: Uint8Array, options: ExecProtocolOptions = {}): Promise<BackendMessage[]> {
    return this.#exclusive((backend) => this.#execMessages(backend, message, options, false))
  }

  #execMessages(backend: Backend, message: Uint8Array, options: ExecProtocolOptions, keepRaw: boolean): BackendMessage[] {
    const kind = this.#checkInput(message)
    if (kind === 'terminate') return []
    const sink = this.#messageSink.reset()
    const handler: ProtocolHandler = keepRaw
      ? {
          onChunk: (bytes) => {
            this.#accumulator.push(bytes)
            this.#messageHandler.onChunk(bytes)
          },
          finish: () => this.#messageHandler.finish(),
        }
      : this.#messageHandler
    this.#execChecked(backend, message, handler, kind)
    handler.finish()
    const { messages, error, notices, notifications } = sink
    sink.reset()
    if (notices && options.onNotice) for (const n of notices) options.onNotice(n)
    if (notifications) this.#notify.dispatch(notifications)
    if (error && options.throwOnError !== false) {
      if (keepRaw) this.#accumulator.take()
      throw error
    }
    return messages
  }

  /** Runs a request or, for a startup packet (first byte 0), the connection handshake. */
  #execChecked(backend: Backend, message: Uint8Array, handler: ProtocolHandler, kind: 'startup' | 'frames'): void {
    if (kind === 'startup') backend.startup(message, handler)
    else backend.exec(message, handler)
  }

  /**
   * Runs raw frontend messages and returns the backend's bytes untouched.
   * @throws {ProtocolError} for malformed frames; the instance stays usable.
   */
  execProtocolRaw(message: Uint8Array, _options: ExecProtocolOptions = {}): Promise<Uint8Array> {
    return this.#exclusive((backend) => {
      const kind = this.#checkInput(message)
      if (kind === 'terminate') return new Uint8Array(0)
      this.#runRaw(backend, message, this.#accumulator.push, kind)
      return this.#accumulator.take()
    })
  }

  /**
   * Runs raw frontend messages, handing the backend's bytes to `onRawData`
   * as the engine writes them; nothing is parsed or kept (notifications are
   * still delivered to listeners).
   */
  execProtocolRawStream(message: Uint8Array, options: ExecProtocolStreamOptions): Promise<void> {
    return this.#exclusive((backend) => {
      const kind = this.#checkInput(message)
      if (kind === 'terminate') return
      this.#runRaw(backend, message, options.onRawData, kind)
    })
  }

  #runRaw(backend: Backend, message: Uint8Array, onData: (bytes: Uint8Array) => void, kind: 'startup' | 'frames'): void {
    try {
      this.#runRawUnchecked(backend, message, onData, kind)
    } finally {
      // Output that did not end in ReadyForQuery leaves the backend skipping
      // to a Sync (e.g. an error in a sequence whose Sync was eaten): the
      // next parsed call sends one first.
      if (kind === 'frames' && this.#runner && !backend.deadError && backend.lastReadyStatus === 0) this.#runner.pendingSync = true
    }
  }

  #runRawUnchecked(backend: Backend, message: Uint8Array, onData: (bytes: Uint8Array) => void, kind: 'startup' | 'frames'): void {
    if (this.#notify.hasListeners) {
      const handler = this.#rawNotify.arm(onData)
      try {
        this.#execChecked(backend, message, handler, kind)
      } finally {
        const notifications: Notification[] | undefined = handler.notifications
        handler.finish()
        if (notifications) this.#notify.dispatch(notifications)
      }
    } else {
      const handler = this.#raw.arm(onData)
      try {
        this.#execChecked(backend, message, handler, kind)
      } finally {
        handler.finish()
      }
    }
  }

  /**
   * Holds the instance's queue until `release()`: no other call runs in
   * between, so a caller can keep the one backend session across several
   * raw execs (a transaction of a socket client). The lease's exec is the
   * raw-stream path (raw or raw + notify).
   */
  async lease(): Promise<EngineLease> {
    const { backend } = await this.#engine()
    const notify = this.#notify
    const queue = this.#queue
    let release!: () => void
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    await new Promise<void>((acquired, failed) => {
      this.#queue
        .run(() => {
          acquired()
          return held
        })
        .catch(failed)
    })
    let released = false
    return {
      execProtocolRawStream: (message, onRawData) => {
        if (released) throw new ClosedError('the lease was released')
        if (this.#closed) throw backend.deadError ?? new ClosedError()
        try {
          const kind = this.#checkInput(message)
          if (kind !== 'terminate') this.#runRaw(backend, message, onRawData, kind)
        } catch (err) {
          if (backend.deadError) this.#markDead()
          throw err
        }
      },
      get inTransaction() {
        return !released && !backend.deadError && backend.inTransaction
      },
      get listeningChannels() {
        return notify.channels
      },
      get othersWaiting() {
        return queue.hasWaiters
      },
      release: () => {
        released = true
        release()
      },
    }
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
   * A new, independent in-memory instance with a copy of this database
   * (taken after a CHECKPOINT).
   */
  clone(): Promise<PGlite> {
    return this.#exclusive(async (backend, runner) => {
      const options = { ...this.#options, dataDir: undefined, loadDataTree: undefined, loadDataDir: undefined }
      if (backend.isSnapshotable && this.#options.initialMemory === undefined && !this.#inTransaction && contribExtensions(options.extensions).length === 0) {
        // A memory-level copy: no startup; session state comes along.
        return PGlite.create({ ...options, cloneOf: backend })
      }
      runner.exec('CHECKPOINT', undefined)
      const tree: DataTree = backend.readDataTree()
      return PGlite.create({ ...options, loadDataTree: tree })
    })
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
      scannerBytes: Math.max(runner?.handlerAssemblyBytes ?? 0, this.#rawNotify.assemblyBytes, this.#messageHandler.assemblyBytes),
      rawBufferBytes: this.#accumulator.capacityBytes,
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
      for (const close of this.#extensionClosers.splice(0).reverse()) {
        try {
          await close()
        } catch (error) {
          failure ??= { error }
        }
      }
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
        // Nothing of an in-memory database is kept: its module goes back to
        // the pool for the next create() instead of a Postgres shutdown.
        const recycled = backend !== undefined && this.#releaseDir === undefined && recycleBackend(backend)
        if (!recycled) backend?.shutdown()
      } finally {
        this.#closed = true
        this.#ready = false
        this.#notify.clear()
        this.#runner = undefined
        await this.#releaseDir?.()
      }
    })
  }

  async [asyncDispose](): Promise<void> {
    await this.close()
  }
}

function isTerminate(message: Uint8Array): boolean {
  return message.length === 5 && message[0] === Frontend.Terminate
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`
}

export { ProtocolError, EngineError }
