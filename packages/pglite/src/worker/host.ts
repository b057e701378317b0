/**
 * The worker side: serves one page's requests on a PGlite instance made by
 * the caller's `init`.
 */
import { ClosedError } from '../errors.js'
import { dropTaggedWatch, taggedWatchIn } from '../live/triggers.js'
import type { PGlite } from '../pglite.js'
import type { Transaction } from '../transaction-types.js'
import type { DescribeQueryResult, Notice } from '../query/results.js'
import { encodeError } from './error-codec.js'
import { OpenTransaction } from './open-transaction.js'
import { fromWireQueryOptions, type PGliteWorkerInitOptions } from './options.js'
import { openChannel, type Channel, type WebWorkerLike, type WorkerLike } from './port.js'
import { withWorkerLane } from './shared-lane.js'
import { sharedName, TabGroup } from './tabs.js'
import { byteaBuffers, ownsBuffer } from './transfer.js'
import { NO_TRANSACTION, type OpValues, type Reply, type Request, type WireDescription } from './protocol.js'

/** Options of {@link worker}. */
export interface WorkerOptions {
  /**
   * Makes the database, from the options the page passed to `PGliteWorker`
   * (e.g. `(options) => PGlite.create(options)`). Called once, on the first
   * request. What it throws is rethrown by the page's `waitReady` as the
   * same class.
   */
  init: (options: PGliteWorkerInitOptions) => Promise<PGlite> | PGlite
  /**
   * Where the page's messages arrive.
   * @default the worker's own scope in a browser, `parentPort` in Node's `worker_threads`
   */
  port?: WorkerLike
}

/** What `query` and `exec` run on: the instance, or an open transaction. */
type Queryable = Pick<Transaction, 'query' | 'exec'>

const HELLO: Reply = { kind: 'hello' }

/**
 * Serves a `PGliteWorker` from inside a Web Worker or a `worker_threads`
 * worker. After `close()` from the page it stops listening, so a Node worker
 * with nothing else to do exits.
 * @returns a promise that resolves once `init` has settled: the database is
 *   ready, or its failure went to the page (it never rejects for that).
 * @throws {TypeError} when called outside a worker without a `port`.
 */
export async function worker(options: WorkerOptions): Promise<void> {
  const port = options.port ?? (await currentWorkerPort())
  await new WorkerHost(withWorkerLane(openChannel(port), await mayBlock()), options.init).started
}

/** Whether this thread may wait in `Atomics.wait`: a worker's may, a page's main thread may not (nor should Node's). */
async function mayBlock(): Promise<boolean> {
  if (typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope === 'function') return true
  if (!globalThis.process?.versions?.node) return false
  const { isMainThread } = await import('node:worker_threads')
  return !isMainThread
}

async function currentWorkerPort(): Promise<WorkerLike> {
  const scope = globalThis as { WorkerGlobalScope?: unknown }
  if (typeof scope.WorkerGlobalScope === 'function') return globalThis as unknown as WebWorkerLike
  if (globalThis.process?.versions?.node) {
    const { parentPort } = await import('node:worker_threads')
    if (parentPort) return parentPort
  }
  throw new TypeError('`worker()` must run inside a Web Worker or a `worker_threads` worker; pass `port` for another channel')
}

class WorkerHost {
  /** Resolves once `init` settled, either way. */
  readonly started: Promise<void>
  readonly #channel: Channel
  readonly #init: WorkerOptions['init']
  readonly #detach: () => void
  readonly #transactions = new Map<number, OpenTransaction>()
  /** `listen` registers this in the worker (one per host, so an `unlisten` removes only its page's); the page keeps the real callbacks. */
  readonly #forwarded = (): void => {}
  readonly #listening = new Set<string>()
  /** Live-query trigger functions a guest tab installed (live/triggers.ts), dropped when it leaves. */
  readonly #liveWatches = new Set<string>()
  /**
   * Serves another tab on a database this worker leads: its `close` ends
   * only its own session (transactions, listens), not the database.
   */
  readonly #guest: boolean
  #unhookNotifications: (() => void) | undefined
  #nextTransaction = 1
  #db: PGlite | undefined
  /** Resolves with the database once it is ready; with undefined in a tab that follows another (tabs.ts). */
  #starting: Promise<PGlite | undefined> | undefined
  /** The tabs sharing this database, when it is shared (tabs.ts). */
  #tabs: TabGroup | undefined
  #markStarted!: () => void

  constructor(channel: Channel, init: WorkerOptions['init'], guestOf?: PGlite) {
    this.#channel = channel
    this.#init = init
    this.#guest = guestOf !== undefined
    this.started = new Promise((resolve) => (this.#markStarted = resolve))
    this.#detach = channel.attach(this.#onMessage)
    if (guestOf) {
      this.#adopt(guestOf)
      this.#markStarted()
    } else {
      channel.post(HELLO)
    }
  }

  readonly #onMessage = (data: unknown): void => {
    // The port may also carry the application's own messages: not ours, not answered.
    if (typeof data !== 'object' || data === null || typeof (data as Request).op !== 'string' || typeof (data as Request).id !== 'number') return
    const request = data as Request
    if (request.op === 'init') void this.#answerInit(request)
    else if (this.#tabs && !this.#tabs.isLeader) this.#tabs.forward(request)
    else if (this.#db) void this.#serve(this.#db, request)
    else void this.#serveWhenStarted(request)
  }

  async #answerInit(request: Extract<Request, { op: 'init' }>): Promise<void> {
    // A page that re-sent `init` after our hello gets the same outcome twice; it keeps the first.
    const name = sharedName(request.options)
    this.#starting ??= name === undefined ? this.#start(request.options) : this.#join(name, request.options)
    try {
      await this.#starting
      if (this.#tabs) this.#channel.post({ kind: 'leader', isLeader: this.#tabs.isLeader, moved: false } satisfies Reply)
      this.#reply({ kind: 'ok', id: request.id, value: undefined })
    } catch (err) {
      this.#replyError(request.id, err, undefined)
      this.#detach()
    } finally {
      this.#markStarted()
    }
  }

  async #start(options: PGliteWorkerInitOptions): Promise<PGlite> {
    const db = await this.#init(options)
    if (typeof db !== 'object' || db === null || typeof db.query !== 'function') {
      throw new TypeError('`init` must return a PGlite instance (or a promise of one)')
    }
    await db.waitReady
    this.#adopt(db)
    return db
  }

  #adopt(db: PGlite): void {
    this.#unhookNotifications = db.onNotification((channel, payload) => this.#channel.post({ kind: 'notification', channel, payload } satisfies Reply))
    this.#db = db
  }

  /**
   * Joins the other tabs of this database: leads (opens it) when none does,
   * else follows. Resolves with the database when leading, with undefined
   * when following (the page's requests are forwarded to the leader).
   */
  async #join(name: string, options: PGliteWorkerInitOptions): Promise<PGlite | undefined> {
    let opened: Promise<PGlite> | undefined
    const tabs = await TabGroup.join(name, {
      lead: async () => {
        opened ??= this.#start(options)
        await opened
      },
      serveFollower: (channel) => {
        const guest = new WorkerHost(channel, this.#init, this.#db!)
        return () => void guest.leave()
      },
      toPage: (reply) => this.#channel.post(reply),
      leaderChanged: (isLeader) => this.#channel.post({ kind: 'leader', isLeader, moved: true } satisfies Reply),
      serveOwn: (request) => this.#onMessage(request),
    })
    this.#tabs = tabs
    // A follower may have to take over: compile the engine now, so that then only the database is read.
    if (!opened) void import('../engine/loading/assets.js').then((m) => m.loadAssets({ assetBaseUrl: options.assetBaseUrl })).catch(() => {})
    return opened
  }

  /** A guest tab went away (or closed): its transactions roll back, its listens go; the database stays open. */
  async leave(): Promise<void> {
    const open = [...this.#transactions.values()]
    this.#transactions.clear()
    await Promise.all(open.map((t) => t.end(false).catch(() => {})))
    const db = this.#db
    if (db && !db.closed) {
      await Promise.all([...this.#listening].map((c) => db.unlisten(c, this.#forwarded).catch(() => {})))
      // A tab that went without closing left its live triggers: each would fire on every write for nothing.
      await Promise.all([...this.#liveWatches].map((name) => db.exec(dropTaggedWatch(name)).catch(() => {})))
    }
    this.#listening.clear()
    this.#liveWatches.clear()
    this.#unhookNotifications?.()
    this.#detach()
  }

  async #serveWhenStarted(request: Request): Promise<void> {
    if (!this.#starting) {
      this.#replyError(request.id, new TypeError(`\`${request.op}\` came before \`init\``), undefined)
      return
    }
    let db: PGlite | undefined
    try {
      db = await this.#starting
    } catch (err) {
      this.#replyError(request.id, err, undefined)
      return
    }
    if (this.#tabs && !this.#tabs.isLeader) this.#tabs.forward(request)
    else if (db ?? this.#db) await this.#serve((db ?? this.#db)!, request)
    else this.#replyError(request.id, new ClosedError('the database is not open in this worker'), undefined)
  }

  /** One request, one reply. An async method rather than `then` callbacks: no closures per call. */
  async #serve(db: PGlite, request: Request): Promise<void> {
    let notices: Notice[] | undefined
    try {
      let value: OpValues[Request['op']]
      let transfer: ArrayBuffer[] | undefined
      switch (request.op) {
        case 'query': {
          if (request.options?.wantsNotices) notices = []
          const options = request.options && fromWireQueryOptions(request.options, notices)
          const result = await this.#queryable(db, request.tx).query(request.sql, request.params, options)
          transfer = byteaBuffers(db, result, request.options?.rowMode === 'array', undefined)
          value = result
          break
        }
        case 'exec': {
          if (request.options?.wantsNotices) notices = []
          const options = request.options && fromWireQueryOptions(request.options, notices)
          const results = await this.#queryable(db, request.tx).exec(request.sql, options)
          if (this.#guest) {
            const watch = taggedWatchIn(request.sql)
            if (watch) this.#liveWatches.add(watch)
          }
          for (const result of results) transfer = byteaBuffers(db, result, request.options?.rowMode === 'array', transfer)
          value = results
          break
        }
        case 'describeQuery':
          value = toWireDescription(await db.describeQuery(request.sql, request.paramTypes && { paramTypes: request.paramTypes }))
          break
        case 'begin':
          value = await this.#begin(db)
          break
        case 'end': {
          const open = this.#transaction(request.tx)
          this.#transactions.delete(request.tx)
          await open.end(request.commit)
          value = undefined
          break
        }
        case 'rollback':
          await this.#transaction(request.tx).tx.rollback()
          value = undefined
          break
        case 'listen':
          await db.listen(request.channel, this.#forwarded, this.#txOrUndefined(request.tx))
          this.#listening.add(request.channel)
          value = undefined
          break
        case 'unlisten':
          await db.unlisten(request.channel, this.#forwarded, this.#txOrUndefined(request.tx))
          this.#listening.delete(request.channel)
          value = undefined
          break
        case 'execProtocolRaw': {
          const bytes = await db.execProtocolRaw(request.message)
          if (ownsBuffer(bytes)) transfer = [bytes.buffer]
          value = bytes
          break
        }
        case 'dumpDataDir': {
          const file = await db.dumpDataDir(request.compression)
          const bytes = new Uint8Array(await file.arrayBuffer())
          value = { bytes, name: (file as Partial<File>).name, type: file.type }
          transfer = [bytes.buffer]
          break
        }
        case 'close':
          if (this.#guest) await this.leave()
          else await db.close()
          value = undefined
          break
        case 'init':
          return
        default:
          throw new TypeError(`unknown request \`${String((request as { op: unknown }).op)}\``)
      }
      this.#reply({ kind: 'ok', id: request.id, value, notices }, transfer)
    } catch (err) {
      this.#replyError(request.id, err, notices)
    }
    // Even a failed close leaves the instance closed. Not listening any more
    // lets a Node worker with nothing else to do exit.
    if (request.op === 'close') {
      this.#transactions.clear()
      this.#detach()
      // Another tab may lead now.
      this.#tabs?.close()
    }
  }

  async #begin(db: PGlite): Promise<number> {
    const id = this.#nextTransaction++
    const open = new OpenTransaction(db)
    this.#transactions.set(id, open)
    try {
      await open.opened
    } catch (err) {
      this.#transactions.delete(id)
      throw err
    }
    return id
  }

  #transaction(id: number): OpenTransaction & { tx: Transaction } {
    const open = this.#transactions.get(id)
    if (!open?.tx) throw new ClosedError('Transaction is closed')
    return open as OpenTransaction & { tx: Transaction }
  }

  #txOrUndefined(id: number): Transaction | undefined {
    return id === NO_TRANSACTION ? undefined : this.#transaction(id).tx
  }

  #queryable(db: PGlite, tx: number): Queryable {
    return tx === NO_TRANSACTION ? db : this.#transaction(tx).tx
  }

  #reply(reply: Extract<Reply, { kind: 'ok' }>, transfer?: ArrayBuffer[]): void {
    try {
      this.#channel.post(reply, transfer)
    } catch (cloneError) {
      // A custom parser in the worker can make values structured clone refuses (functions, class instances with them).
      const error = new TypeError(`the result cannot be sent to the page: ${(cloneError as Error).message}`, { cause: cloneError })
      this.#replyError(reply.id, error, undefined)
    }
  }

  #replyError(id: number, error: unknown, notices: Notice[] | undefined): void {
    try {
      this.#channel.post({ kind: 'error', id, error: encodeError(error), notices } satisfies Reply)
    } catch {
      // A field that does not clone (e.g. a parameter object of the worker's own making) is dropped rather than the error.
      this.#channel.post({ kind: 'error', id, error: encodeError(error, true), notices } satisfies Reply)
    }
  }
}

/** `notices`, when given, collects what `onNotice` would have received on the page. */

function toWireDescription(description: DescribeQueryResult): WireDescription {
  return {
    queryParams: description.queryParams.map((p) => ({ dataTypeID: p.dataTypeID })),
    resultFields: description.resultFields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })),
  }
}
