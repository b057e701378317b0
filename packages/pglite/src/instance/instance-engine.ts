/**
 * The engine an instance runs on: the queue its calls take turns in, the
 * engine of each turn, and the instance's life around it (started, dead
 * and started again, closing, closed). The `PGlite` class holds one and
 * delegates to it.
 */
import type { Backend } from '../engine/backend/backend.js'
import type { EngineError } from '../engine/engine-error.js'
import type { ArrayTypeRow } from '../engine/start/template.js'
import { ClosedError } from '../errors.js'
import type { EngineLease } from '../lease-types.js'
import { NotifyRegistry } from '../notify.js'
import type { ResultCollector } from '../protocol/decode.js'
import { TxStatus } from '../engine/wire/message-codes.js'
import { stoppable, whileNotAborted } from '../query/abort.js'
import { ExecQueue } from '../query/queue.js'
import type { QueryOptions } from '../query/results.js'
import { QueryRunner } from '../query/runner.js'
import type { Parser, Serializer } from '../types/index.js'
import { arrayTypesNote, registerArrayTypes } from './array-types.js'
import { endEngine } from './engine-close.js'
import { takeLease } from './engine-lease.js'
import { deathError, restartFailure, startAgain } from './engine-restart.js'
import type { OpenedInstance } from './open-instance.js'
import { ProtocolExec } from './protocol-exec.js'
import { quoteIdent } from '../quote-ident.js'

/** What each engine's session is set up with, from the instance's options. */
export interface SessionSettings {
  readonly dataDir: string | undefined
  readonly username: string | undefined
  readonly maxMemory: number | undefined
  readonly statementCacheSize: number
  /** The caller gave serializers of its own. */
  readonly customSerializers: boolean
  /** The instance's own maps: array types are added to them. */
  readonly parsers: Record<number, Parser>
  readonly serializers: Record<number, Serializer>
}

export class InstanceEngine {
  readonly queue = new ExecQueue()
  readonly notify = new NotifyRegistry()
  readonly protocol = new ProtocolExec(this.notify, () => this.#runner)
  readonly #settings: SessionSettings
  /** The instance's start (its `waitReady`), which calls made before it wait for. */
  readonly #waitReady: () => Promise<void>
  #backend: Backend | undefined
  #runner: QueryRunner | undefined
  /** How the engine was started: its storage, how it starts again, how its state is saved. */
  #opened: OpenedInstance | undefined
  #ready = false
  #closing = false
  /** Why the instance was closed when it was not its owner's close(). */
  #closedBecause: string | undefined
  #closed = false
  /** How many times the engine was started again after it died. */
  #restarts = 0
  #inTransaction = false

  constructor(settings: SessionSettings, waitReady: () => Promise<void>) {
    this.#settings = settings
    this.#waitReady = waitReady
  }

  get backend(): Backend | undefined {
    return this.#backend
  }

  get runner(): QueryRunner | undefined {
    return this.#runner
  }

  get opened(): OpenedInstance | undefined {
    return this.#opened
  }

  /** Started, and not (yet) failed or closed; close() may have begun. */
  get started(): boolean {
    return this.#ready
  }

  /** True once started and until `close()` begins. */
  get ready(): boolean {
    return this.#ready && !this.#closing && !this.#closed
  }

  get closing(): boolean {
    return this.#closing
  }

  get closed(): boolean {
    return this.#closed
  }

  /** Whether the session is inside a transaction, as of the last request. */
  get inTransaction(): boolean {
    return this.#inTransaction
  }

  /** The start's engine becomes the instance's, its session set up. */
  open(opened: OpenedInstance): void {
    this.#opened = opened
    const runner = this.#attach(opened.backend)
    // A copy inherits the source's prepared statements; its cache starts empty.
    if (opened.copied) runner.exec('DEALLOCATE ALL', undefined)
    this.#setRole(runner)
    opened.learnArrayTypes(this.registerArrayTypes(runner, opened.knownArrayTypes))
    this.#ready = true
  }

  /** A start that failed once the engine ran (an add-on's `init`): the engine is shut down and the storage let go of. */
  failStart(): void {
    this.#ready = false
    try {
      this.#backend?.shutdown()
    } finally {
      this.#closed = true
      this.#opened?.releaseDir?.()
    }
  }

  /** Says why the instance is closing when it is not its owner's close() (the first reason wins). */
  closeBecause(reason: string): void {
    this.#closedBecause ??= reason
  }

  /** Makes `backend` the instance's engine, with a new query runner for it. */
  #attach(backend: Backend): QueryRunner {
    const settings = this.#settings
    this.#backend = backend
    backend.memoryLimit = settings.maxMemory
    this.#runner = new QueryRunner(
      backend,
      { afterExec: (c, o) => this.#afterExec(c, o) },
      settings.parsers,
      settings.serializers,
      settings.statementCacheSize,
      settings.customSerializers,
    )
    return this.#runner
  }

  #setRole(runner: QueryRunner): void {
    const { username } = this.#settings
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
          await startAgain(dead, { restart, adopt: (backend) => this.#adopt(backend), channels: this.notify.channels })
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
    this.registerArrayTypes(runner)
    return runner
  }

  #deathError(dead: Backend, pending = false): EngineError {
    return deathError(dead, {
      dataDir: this.#settings.dataDir,
      restartable: this.#opened?.restart !== undefined,
      pending,
      replaced: !this.#closed && this.#backend !== dead,
      closedBecause: this.#closedBecause,
    })
  }

  /** Adds parsers and serializers for the catalog's array types (`known`: skip the query). Returns the rows used. */
  registerArrayTypes(runner: QueryRunner, known?: readonly ArrayTypeRow[]): readonly ArrayTypeRow[] {
    return registerArrayTypes(runner, this.#settings.parsers, this.#settings.serializers, known)
  }

  #afterExec(collector: ResultCollector, options: QueryOptions | undefined): void {
    if (collector.notices && options?.onNotice) for (const n of collector.notices) options.onNotice(n)
    if (collector.notifications) this.notify.dispatch(collector.notifications)
    this.#inTransaction = collector.txStatus !== TxStatus.Idle
  }

  /** Why a call on a closed instance fails: the engine's death, when that closed it. */
  #closedFailure(): Error {
    const backend = this.#backend
    return backend?.deadError ? this.#deathError(backend) : this.#closedError()
  }

  #closedError(): ClosedError {
    return this.#closedBecause ? new ClosedError(`PGlite is closed: ${this.#closedBecause}`) : new ClosedError()
  }

  /** Waits until the instance is started; rejects once it is closing or closed. The engine itself is taken in the queue. */
  async #started(): Promise<void> {
    if (this.#closing || this.#closed) throw this.#closedFailure()
    if (!this.#ready) await this.#waitReady()
  }

  /**
   * Runs `job` on the engine in the queue, with the engine of its turn (a
   * directory database may have started a new one meanwhile). If the engine
   * died, the instance starts it again or closes (see `#afterDeath`).
   */
  async exclusive<T>(job: (backend: Backend, runner: QueryRunner) => Promise<T> | T): Promise<T> {
    await this.#started()
    return this.queue.run(async () => {
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
   * {@link exclusive}, stopped by `signal` (query/abort.ts): before its
   * turn, or where the engine polls while it runs. Without a signal the
   * call costs what it always did: no wrapper, no extra promise.
   */
  exclusiveUnless<T>(signal: AbortSignal | undefined, job: (backend: Backend, runner: QueryRunner) => Promise<T>): Promise<T> {
    if (!signal) return this.exclusive(job)
    return stoppable(signal, (stopped) => this.exclusive((backend, runner) => stopped() ?? whileNotAborted(backend, signal, () => job(backend, runner))))
  }

  #markDead(): void {
    this.#closed = true
    this.#ready = false
    void this.#opened?.releaseDir?.()
    this.notify.clear()
  }

  /** `PGlite.lease()`: the queue held for one caller (engine-lease.ts). */
  async lease(): Promise<EngineLease> {
    await this.#started()
    const engine = this
    return takeLease({
      queue: this.queue,
      notify: this.notify,
      protocol: this.protocol,
      get closed() {
        return engine.#closed
      },
      get backend() {
        return engine.#backend!
      },
      get restarts() {
        return engine.#restarts
      },
      closedFailure: () => this.#closedFailure(),
      afterDeath: (dead) => this.#afterDeath(dead),
      diedUnderLease: (dead) => {
        if (!this.#opened?.restart) this.#markDead()
        return this.#deathError(dead, true)
      },
    })
  }

  /** Shuts the engine down after queued calls finish; `fs` (PGlite's `fs` option) is closed after it. */
  async close(fs: { closeFs(): Promise<void> } | undefined): Promise<void> {
    this.#closing = true
    try {
      await this.#waitReady()
    } catch {
      this.#closed = true
      return
    }
    await this.queue.run(async () => {
      try {
        const backend = this.#backend
        const stored = this.#opened?.releaseDir !== undefined
        if (backend) endEngine(backend, { stored, fsOption: !!fs, note: () => this.#closingNote() })
      } finally {
        this.#closed = true
        this.#ready = false
        this.notify.clear()
        this.#runner = undefined
        await this.#opened?.releaseDir?.()
        await fs?.closeFs()
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
}
