/**
 * The page side: `PGliteWorker`, the async API of `PGlite` over a worker
 * that runs the engine.
 */
import { abortedError } from '../query/abort.js'
import { ClosedError, EngineError } from '../errors.js'
import { closeAddOns } from '../extensions/add-on-closers.js'
import type { DumpCompression } from '../fs/dump.js'
import { NotifyRegistry, toChannelName, type ChannelListener, type NotificationListener } from '../notify.js'
import type { ExecProtocolOptions, ExecProtocolStreamOptions } from '../exec-protocol-types.js'
import type { Transaction } from '../transaction-types.js'
import type { DescribeQueryResult, Notice, QueryOptions, Results } from '../query/results.js'
import { query as templateQuery } from '../query/template.js'
import { defaultParsers, defaultSerializers } from '../types/index.js'
import { PendingCalls } from './calls.js'
import { toInitOptions, toWireQueryOptions, type PGliteWorkerExtension, type PGliteWorkerOptions, type WorkerExtensionNamespaces } from './options.js'
import { openChannel, type Channel, type Death, type WorkerLike } from './port.js'
import { PageLane, withPageLane } from './shared-lane.js'
import { ownsBuffer } from './transfer.js'
import { NO_TRANSACTION, type OpValues, type Reply, type Request } from './protocol.js'
import type { PGliteWorkerInterface } from './interface.js'

const asyncDispose: typeof Symbol.asyncDispose =
  (Symbol as { asyncDispose?: typeof Symbol.asyncDispose }).asyncDispose ??
  (Symbol.for('nodejs.asyncDispose') as typeof Symbol.asyncDispose)

/**
 * A PGlite database running in a Web Worker or a `worker_threads` worker,
 * with the same async API as `PGlite`; the worker runs `worker({ init })`.
 * Every call is one message each way; results arrive by structured clone.
 *
 * @example
 * ```ts
 * const pg = await PGliteWorker.create(new Worker(new URL('./pg-worker.js', import.meta.url), { type: 'module' }))
 * const { rows } = await pg.query('select $1::int as n', [1])
 * ```
 */
export class PGliteWorker implements PGliteWorkerInterface {
  /** Resolves when the worker's database is ready; rejects with what `init` threw, as the same class. */
  readonly waitReady: Promise<void>
  /** The `debug` option given (the server log, if any, is written in the worker). */
  readonly debug: number

  readonly #channel: Channel
  readonly #detach: () => void
  readonly #terminateOnClose: boolean
  readonly #calls: PendingCalls
  readonly #notify = new NotifyRegistry()
  readonly #transactionIds = new WeakMap<Transaction, number>()
  /** Set until the worker answers it, so a `hello` can have it sent again. */
  #initRequest: Request | undefined
  #ready = false
  #isLeader = true
  readonly #leaderListeners = new Set<() => void>()
  /** The page add-ons' `close`s, run first thing in `close()`. */
  readonly #extensionClosers: (() => Promise<void>)[] = []
  #closing = false
  #closed = false
  #closeReason = ''
  #closePromise: Promise<void> | undefined

  /**
   * Starts the worker's database with `options` (sent to its `init`).
   * @param worker a browser `Worker` or a `worker_threads` `Worker` whose script calls `worker({ init })`.
   * @throws {TypeError} when `options` holds `parsers` or `serializers` (functions cannot cross), or an `extensions` entry that must load in the worker.
   */
  constructor(worker: WorkerLike, options: PGliteWorkerOptions = {}) {
    const initOptions = toInitOptions(options)
    const extensions = pageExtensions(options.extensions)
    this.debug = options.debug ?? 0
    this.#terminateOnClose = options.terminateOnClose ?? false
    this.#channel = withPageLane(openChannel(worker))
    this.#calls = new PendingCalls(this.#channel)
    this.#detach = this.#channel.attach(this.#onMessage, this.#onDeath)
    const init: Request = { op: 'init', id: this.#calls.nextId(), options: initOptions }
    this.#initRequest = init
    this.waitReady = this.#calls.send(init, undefined, undefined).then(
      async () => {
        this.#initRequest = undefined
        this.#ready = true
        if (extensions.length > 0) await this.#attachExtensions(extensions)
      },
      (err: unknown) => {
        this.#initRequest = undefined
        this.#shutDown('its database failed to start')
        throw err
      },
    )
    // A worker nobody awaits must not crash the process with an unhandled rejection.
    this.waitReady.catch(() => {})
  }

  /**
   * Creates a `PGliteWorker` and waits until its database is ready.
   * @throws what the worker's `init` threw, as the same class.
   */
  static async create<O extends PGliteWorkerOptions>(worker: WorkerLike, options?: O): Promise<PGliteWorker & WorkerExtensionNamespaces<O['extensions']>> {
    const pg = new PGliteWorker(worker, options)
    await pg.waitReady
    // The namespaces were attached under the keys the option type names.
    return pg as PGliteWorker & WorkerExtensionNamespaces<O['extensions']>
  }

  /** Each add-on's `setup` on this page, then its namespace as `this[key]` and its `init`; one that fails closes the worker's database. */
  async #attachExtensions(extensions: readonly [key: string, extension: PGliteWorkerExtension][]): Promise<void> {
    try {
      for (const [key, extension] of extensions) {
        const { namespaceObj, init, close, bundlePath } = (await extension.setup(this, {}, true)) ?? {}
        if (bundlePath !== undefined) {
          throw new TypeError(`extension \`${key}\` brings an engine bundle: load it in the worker's \`init\` (\`PGlite.create({ extensions })\`), not on the page`)
        }
        if (namespaceObj !== undefined) Object.defineProperty(this, key, { value: namespaceObj, enumerable: true })
        if (close) this.#extensionClosers.push(close)
        await init?.()
      }
    } catch (err) {
      // Not close(): that waits for waitReady, which is this.
      await this.#calls.send({ op: 'close', id: this.#calls.nextId() }, undefined, undefined).catch(() => {})
      this.#shutDown('an extension failed to start')
      if (this.#terminateOnClose) await this.#channel.terminate()
      throw err
    }
  }

  /** True once the database is ready and until `close()` begins or the worker dies. */
  get ready(): boolean {
    return this.#ready && !this.#closing && !this.#closed
  }

  /** True after `close()` finished, the start failed, or the worker died. */
  get closed(): boolean {
    return this.#closed
  }

  /**
   * Whether calls go through shared memory rather than `postMessage` (in
   * Chromium here a round trip of ~40 µs instead of 90-170): on a
   * cross-origin isolated page (served with `Cross-Origin-Opener-Policy:
   * same-origin` and `Cross-Origin-Embedder-Policy: require-corp`) and in
   * Node, once the worker accepted. Large or unusual values still go by
   * message.
   */
  get usesSharedMemory(): boolean {
    return this.#channel instanceof PageLane && this.#channel.ready
  }

  /** @internal Calls sent through shared memory and by message so far. */
  _internalStats(): { sharedCalls: number; messageCalls: number } {
    const counts = this.#channel instanceof PageLane ? this.#channel.counts : undefined
    return { sharedCalls: counts?.shared ?? 0, messageCalls: counts?.message ?? 0 }
  }

  /**
   * Whether this page's worker runs the database. Tabs that open the same
   * `idb://` database (or the same `id`) share it: one tab's worker leads
   * and the others forward their calls to it. Always true for a database
   * that is not shared.
   */
  get isLeader(): boolean {
    return this.#isLeader
  }

  /**
   * Calls `callback` each time a tab starts leading after the one before it
   * went away, in every tab sharing the database (read {@link isLeader} to
   * know whether it is this one), as `@electric-sql/pglite/worker` does. The
   * database then runs in a new session: this page's `listen` channels are
   * listened to again before the callbacks run, and live queries install
   * their triggers again. Returns a function that removes it.
   */
  onLeaderChange(callback: () => void): () => void {
    this.#leaderListeners.add(callback)
    return () => this.offLeaderChange(callback)
  }

  offLeaderChange(callback: () => void): void {
    this.#leaderListeners.delete(callback)
  }

  /**
   * Runs one statement with parameters, as `PGlite.query`. Parameters and
   * rows cross by structured clone.
   * @throws {TypeError} for the `parsers` or `serializers` option (functions cannot cross), or parameters that do not clone.
   * @throws {DatabaseError} when Postgres reports an error.
   * @throws {EngineError} code `ENGINE_EXIT` when the worker died before answering.
   */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>> {
    // The row type is the caller's claim, as with PGlite.
    return this.#query(NO_TRANSACTION, sql, params, options) as Promise<Results<never>>
  }

  /** Like {@link query}, from a template: `` pg.sql`select * from t where id = ${id}` ``. */
  sql<T = Record<string, unknown>>(strings: TemplateStringsArray, ...params: unknown[]): Promise<Results<T>> {
    const { query, params: values } = templateQuery(strings, ...params)
    return this.query<T>(query, values)
  }

  /**
   * Runs one or more statements without parameters and returns a result per statement, as `PGlite.exec`.
   * @throws {DatabaseError} when Postgres reports an error.
   */
  exec(sql: string, options?: QueryOptions): Promise<Results[]> {
    return this.#exec(NO_TRANSACTION, sql, options)
  }

  /**
   * The parameter and result types of a statement, without running it. The
   * `serializer` and `parser` are this side's defaults for each type: the
   * worker's own, custom ones cannot cross.
   */
  async describeQuery(sql: string, options?: QueryOptions): Promise<DescribeQueryResult> {
    const described = await this.#call({ op: 'describeQuery', id: this.#calls.nextId(), sql, paramTypes: options?.paramTypes })
    return {
      queryParams: described.queryParams.map((p) => ({ dataTypeID: p.dataTypeID, serializer: defaultSerializers[p.dataTypeID] })),
      resultFields: described.resultFields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID, parser: defaultParsers[f.dataTypeID] ?? ((value: string) => value) })),
    }
  }

  /**
   * Runs `callback` in a transaction that holds the worker's database: it
   * commits when the callback returns and rolls back when it throws. Each
   * statement of `tx` is one message; nothing else runs in between.
   * @throws {DatabaseError} code `25P02` when COMMIT found the transaction aborted.
   */
  async transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T> {
    const txId = await this.#call({ op: 'begin', id: this.#calls.nextId() })
    let closed = false
    const closedError = (): Promise<never> => Promise.reject(new ClosedError('Transaction is closed'))
    const tx: Transaction = {
      query: (sql, params, options) => (closed ? closedError() : (this.#query(txId, sql, params, options) as Promise<Results<never>>)),
      sql: (strings, ...params) => {
        const { query, params: values } = templateQuery(strings, ...params)
        return tx.query(query, values)
      },
      exec: (sql, options) => (closed ? closedError() : this.#exec(txId, sql, options)),
      rollback: async () => {
        if (closed) throw new ClosedError('Transaction is closed')
        await this.#callInTransaction({ op: 'rollback', id: this.#calls.nextId(), tx: txId })
        closed = true
      },
      listen: (channel, callback) => (closed ? closedError() : this.#listen(channel, callback, txId)),
      get closed() {
        return closed
      },
    }
    this.#transactionIds.set(tx, txId)
    let result: T
    try {
      result = await callback(tx)
    } catch (err) {
      closed = true
      // The callback's error is what the caller needs; a rollback that also
      // fails (the worker died) would add nothing to it.
      await this.#callInTransaction({ op: 'end', id: this.#calls.nextId(), tx: txId, commit: false }).catch(() => {})
      throw err
    }
    closed = true
    await this.#callInTransaction({ op: 'end', id: this.#calls.nextId(), tx: txId, commit: true })
    return result
  }

  /**
   * Subscribes to a NOTIFY channel (`LISTEN` in the worker); notifications
   * are forwarded to this side.
   * @returns a function that unsubscribes this callback.
   */
  listen(channel: string, callback: ChannelListener, tx?: Transaction): Promise<(tx?: Transaction) => Promise<void>> {
    if (tx) return tx.listen(channel, callback)
    return this.#listen(channel, callback, NO_TRANSACTION)
  }

  /** Removes a callback (or every callback) of a channel; `UNLISTEN`s when none is left. */
  async unlisten(channel: string, callback?: ChannelListener, tx?: Transaction): Promise<void> {
    if (!this.#notify.remove(toChannelName(channel), callback)) return
    if (this.#closing || this.#closed) return
    const txId = tx && this.#transactionIds.get(tx)
    if (txId !== undefined) await this.#callInTransaction({ op: 'unlisten', id: this.#calls.nextId(), tx: txId, channel })
    else if (tx) await tx.exec(`UNLISTEN ${channel}`)
    else await this.#call({ op: 'unlisten', id: this.#calls.nextId(), tx: NO_TRANSACTION, channel })
  }

  /** Calls `callback` for every notification on any channel the worker's session listens to. */
  onNotification(callback: NotificationListener): () => void {
    this.#notify.addGlobal(callback)
    return () => this.#notify.removeGlobal(callback)
  }

  offNotification(callback: NotificationListener): void {
    this.#notify.removeGlobal(callback)
  }

  /**
   * Runs raw frontend messages in the worker and returns the backend's bytes untouched.
   * @throws {ProtocolError} for malformed frames; the database stays usable.
   */
  execProtocolRaw(message: Uint8Array, _options?: ExecProtocolOptions): Promise<Uint8Array> {
    // Structured clone copies a view's whole buffer: a view into a larger
    // buffer is copied out first, and that copy is ours to transfer.
    if (ownsBuffer(message)) return this.#call({ op: 'execProtocolRaw', id: this.#calls.nextId(), message })
    const copy = message.slice()
    return this.#call({ op: 'execProtocolRaw', id: this.#calls.nextId(), message: copy }, undefined, [copy.buffer])
  }

  /** Like {@link execProtocolRaw}; `onRawData` gets the whole reply in one call, once it crossed from the worker. */
  async execProtocolRawStream(message: Uint8Array, options: ExecProtocolStreamOptions): Promise<void> {
    options.onRawData(await this.execProtocolRaw(message))
  }

  /**
   * The data directory as a tarball, as `PGlite.dumpDataDir`: a `File`
   * (a `Blob` where `File` is missing).
   * @param compression `'auto'` (the default) and `'gzip'` compress; `'none'` does not.
   */
  async dumpDataDir(compression?: DumpCompression): Promise<File | Blob> {
    const { bytes, name, type } = await this.#call({ op: 'dumpDataDir', id: this.#calls.nextId(), compression })
    const parts: BlobPart[] = [bytes as Uint8Array<ArrayBuffer>]
    return name !== undefined && typeof File === 'function' ? new File(parts, name, { type }) : new Blob(parts, { type })
  }

  /**
   * Closes the worker's database cleanly once the calls already made finish.
   * The worker itself is terminated only with `terminateOnClose`. A second
   * call returns the same promise; calls made after it reject with
   * {@link ClosedError}.
   */
  close(): Promise<void> {
    this.#closePromise ??= this.#extensionClosers.length > 0 ? this.#closeWithExtensions() : this.#close()
    return this.#closePromise
  }

  /** Add-ons clean up first, while queries still run; one that fails does not keep the database open. */
  async #closeWithExtensions(): Promise<void> {
    const failure = await closeAddOns(this.#extensionClosers)
    await this.#close()
    if (failure) throw failure.error
  }

  async #close(): Promise<void> {
    if (this.#closed) return
    this.#closing = true
    try {
      await this.waitReady
    } catch {
      return
    }
    if (this.#closed) return
    try {
      await this.#calls.send({ op: 'close', id: this.#calls.nextId() }, undefined, undefined)
    } finally {
      this.#shutDown('it was closed')
      if (this.#terminateOnClose) await this.#channel.terminate()
    }
  }

  async [asyncDispose](): Promise<void> {
    await this.close()
  }

  #query(tx: number, sql: string, params: readonly unknown[] | undefined, options: QueryOptions | undefined): Promise<Results> {
    if (options?.signal?.aborted) return Promise.reject(abortedError(options.signal))
    let wire
    try {
      wire = toWireQueryOptions(options, 'query')
    } catch (err) {
      return Promise.reject(err)
    }
    const request = { op: 'query', id: this.#calls.nextId(), tx, sql, params, options: wire } as const
    return tx === NO_TRANSACTION ? this.#call(request, options?.onNotice) : this.#callInTransaction(request, options?.onNotice)
  }

  #exec(tx: number, sql: string, options: QueryOptions | undefined): Promise<Results[]> {
    if (options?.signal?.aborted) return Promise.reject(abortedError(options.signal))
    let wire
    try {
      wire = toWireQueryOptions(options, 'exec')
    } catch (err) {
      return Promise.reject(err)
    }
    const request = { op: 'exec', id: this.#calls.nextId(), tx, sql, options: wire } as const
    return tx === NO_TRANSACTION ? this.#call(request, options?.onNotice) : this.#callInTransaction(request, options?.onNotice)
  }

  async #listen(channel: string, callback: ChannelListener, tx: number): Promise<(tx?: Transaction) => Promise<void>> {
    const name = toChannelName(channel)
    this.#notify.add(name, callback)
    try {
      const request = { op: 'listen', id: this.#calls.nextId(), tx, channel } as const
      await (tx === NO_TRANSACTION ? this.#call(request) : this.#callInTransaction(request))
    } catch (err) {
      this.#notify.remove(name, callback)
      throw err
    }
    return (tx?: Transaction) => this.unlisten(channel, callback, tx)
  }

  /** A call outside any transaction: refused once `close()` began. */
  #call<R extends Request>(request: R, onNotice?: (notice: Notice) => void, transfer?: ArrayBuffer[]): Promise<OpValues[R['op']]> {
    if (this.#closing || this.#closed) return Promise.reject(this.#closedError())
    if (!this.#ready) return this.waitReady.then(() => this.#sendUnlessClosed(request, onNotice, transfer))
    return this.#calls.send(request, onNotice, transfer)
  }

  /** A transaction's statement: still runs while `close()` waits, since the close waits for the transaction. */
  #callInTransaction<R extends Request>(request: R, onNotice?: (notice: Notice) => void): Promise<OpValues[R['op']]> {
    return this.#sendUnlessClosed(request, onNotice, undefined)
  }

  #sendUnlessClosed<R extends Request>(request: R, onNotice: ((notice: Notice) => void) | undefined, transfer: ArrayBuffer[] | undefined): Promise<OpValues[R['op']]> {
    if (this.#closed) return Promise.reject(this.#closedError())
    return this.#calls.send(request, onNotice, transfer)
  }

  readonly #onMessage = (data: unknown): void => {
    const reply = data as Reply | null | undefined
    switch (reply?.kind) {
      case 'ok':
      case 'error':
        this.#calls.settle(reply)
        return
      case 'notification':
        this.#notify.dispatch([{ processId: 0, channel: reply.channel, payload: reply.payload }])
        return
      case 'hello':
        if (this.#initRequest) this.#channel.post(this.#initRequest)
        return
      case 'leader':
        this.#isLeader = reply.isLeader
        if (reply.moved) this.#leaderMoved()
        return
    }
  }

  /** A new session runs the database: LISTEN again, then tell the listeners. */
  #leaderMoved(): void {
    if (this.#closing || this.#closed) return
    for (const channel of this.#notify.channels) {
      // A failure here is the new leader going too; the next move listens again.
      this.#call({ op: 'listen', id: this.#calls.nextId(), tx: NO_TRANSACTION, channel }).catch(() => {})
    }
    for (const listener of [...this.#leaderListeners]) {
      try {
        listener()
      } catch {
        // A listener's error is its own; the others still hear of the change.
      }
    }
  }

  readonly #onDeath = (death: Death): void => {
    if (this.#closed) return
    const what =
      death.reason === 'exit'
        ? `exited (exit code ${death.exitCode})`
        : `failed: ${death.error instanceof Error ? death.error.message : String(death.error)}`
    const error = new EngineError(`the worker ${what}`, { code: 'ENGINE_EXIT', cause: death.reason === 'error' ? death.error : undefined })
    this.#shutDown(`its worker ${what}`)
    this.#calls.rejectAll(error)
  }

  #shutDown(reason: string): void {
    if (this.#closed) return
    this.#closed = true
    this.#ready = false
    this.#closeReason = reason
    this.#detach()
    this.#notify.clear()
  }

  #closedError(): ClosedError {
    return new ClosedError(this.#closed ? `the PGliteWorker is closed: ${this.#closeReason}` : 'the PGliteWorker is closing')
  }
}

// Fails to compile when the class gains a public member its interface lacks:
// page add-ons see the instance through the interface. `_internalStats` is for tests.
type NoneMissing<Missing extends never> = Missing
type PGliteWorkerInterfaceComplete = NoneMissing<Exclude<keyof PGliteWorker, keyof PGliteWorkerInterface | '_internalStats'>>

/**
 * The add-ons that run on the page, in order.
 * @throws {TypeError} for one that cannot: a contrib module or anything without `setup`.
 */
function pageExtensions(extensions: PGliteWorkerOptions['extensions']): [key: string, extension: PGliteWorkerExtension][] {
  const entries = Object.entries(extensions ?? {})
  for (const [key, extension] of entries) {
    if (key in PGliteWorker.prototype) throw new TypeError(`extension key \`${key}\` would hide a PGliteWorker member`)
    if (typeof extension !== 'object' || extension === null || typeof (extension as { setup?: unknown }).setup !== 'function') {
      throw new TypeError(
        `extension \`${key}\` cannot run on the page (contrib modules and other engine bundles load in the worker's \`init\`: \`PGlite.create({ extensions })\`)`,
      )
    }
  }
  return entries
}
