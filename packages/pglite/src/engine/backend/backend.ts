import type { EngineAssets } from '../loading/assets.js'
import { untimedWaitError } from './untimed-waits.js'
import { isExitStatus, type PostgresModule } from '../emscripten.js'
import { EngineError } from '../engine-error.js'
import { BlankModule } from './blank-module.js'
import { discard, explainCrash, type BackendOptions, type ExpiredTimeout, type ProtocolSink, type SessionTimeouts } from './backend-types.js'
import { PGDATA, backendEnv, asHost, lockShippedTrees, type ModuleControl } from './module.js'
import { resetForRestore, restoreSnapshot, tableLength, takeSnapshot, type EngineSnapshot } from '../start/snapshot.js'
import { materializeTree, readTree, type DataTree } from '../files/pgdata-tree.js'
import type { BlobDevice } from '../files/blob-device.js'
import type { EngineClient } from '../hooks/client-functions.js'
import type { ActivityRow } from '../hooks/activity-report.js'
import { isStackOverflow, type SessionGuards } from '../hooks/session-guards.js'
import { notePrepared } from '../start/dynamic-links.js'
import { readCleanShutdown, recordCleanShutdown, withInitFilesKept } from './clean-shutdown.js'
import { CHECKPOINT_REQUEST, CheckpointSchedule, SEGMENTS_PER_CHECKPOINT } from './wal-checkpoints.js'
import { FrameWriter } from '../wire/frame-writer.js'
import { TxStatus } from '../wire/message-codes.js'
import { RequestWire } from './request-wire.js'
import { isErrorExit, recoverFromError, stackDepthError } from './error-recovery.js'
import { readTransactionBlock, type TransactionBlock } from './transaction-block.js'

/** `callMain` returns this when the backend is up and waiting (docs/engine.md). */
const EXIT_ALIVE = 99
/**
 * A module whose memory grew past this is not reused: WASM memory never
 * shrinks, so the next database would hold (and, under a `maxMemory`,
 * count) what one large statement of the last one took. Modules start at
 * 128 MiB and most stay there.
 */
const RECYCLE_MAX_BYTES = 256 * 1024 * 1024
/** How long past a transaction_timeout a server's statement runs before the engine cancels it. */
const SERVER_TRANSACTION_GRACE_MS = 100
/**
 * How long a request runs before the host is first asked whether it is to
 * stop, and how often after that: short requests never ask, and a long one
 * stops within this of being canceled (where it calls out of the engine).
 */
const STOP_POLL_MS = 10
/** The memory a module starts with: the engine's own minimum (its wasm declares 2,048 pages). */
export const DEFAULT_MEMORY = 128 * 1024 * 1024

const BEGIN = new FrameWriter().query('BEGIN').view().slice()
const COMMIT = new FrameWriter().query('COMMIT').view().slice()
const ROLLBACK = new FrameWriter().query('ROLLBACK').view().slice()

/**
 * One Postgres backend in one WASM module: the only owner of the Emscripten
 * module object. Requests are synchronous; the caller serializes them.
 */
export class Backend {
  readonly #mod: PostgresModule
  readonly #control: ModuleControl
  readonly #callbacks: number[]
  readonly #log: string[]
  readonly #blob: BlobDevice
  readonly #wire: RequestWire
  readonly #pristineTable: number
  readonly #blank: BlankModule
  /** On MEMFS only (not a mounted directory): the module can serve another in-memory database. */
  readonly #inMemory: boolean
  #dead: EngineError | undefined
  /** Requests run so far (exec calls): a count that only grows. */
  requests = 0
  /** A request runs (alarms may be delivered, see #alarmMayGoOff). */
  #inRequest = false
  #requestStarted = 0
  /** The running request was marked canceled for its time limit. */
  #canceled = false

  /**
   * Requests that run longer than this (ms) are canceled with 57014 where
   * they call out of the engine (alarms.ts), as a CancelRequest would;
   * undefined: no limit. Set by whoever holds the engine for the next requests.
   */
  timeLimitMs: number | undefined
  /**
   * Asked where a request that has run {@link STOP_POLL_MS} calls out of the
   * engine, and then every {@link STOP_POLL_MS}, whether it is to stop (its
   * client canceled it or left); true cancels it as `timeLimitMs` does.
   * Undefined: never asked.
   */
  stopWhen: (() => boolean) | undefined
  /**
   * Called where any request that has run {@link STOP_POLL_MS} calls out of
   * the engine, and then every {@link STOP_POLL_MS}, whoever runs it (an
   * in-process caller too): a server tells its helper process that this
   * thread is busy, so new clients get in meanwhile. Undefined: none.
   */
  whileBusy: (() => void) | undefined
  /**
   * Where a request inside `COPY ... FROM STDIN` gets more data once it has
   * read all of its own: each call returns whole CopyData frames, the last
   * of them possibly a CopyDone or CopyFail, or undefined to fail the COPY.
   * It may block (a server reading its client's socket). Undefined: the
   * COPY fails when the request runs out, as it always did.
   */
  get copyInSource(): (() => Uint8Array | undefined) | undefined {
    return this.#wire.copyInSource
  }

  set copyInSource(source: (() => Uint8Array | undefined) | undefined) {
    this.#wire.copyInSource = source
  }
  #closed = false
  /** For a directory: writes what the next start may reuse (clean-shutdown.ts). */
  #recordOnShutdown: ((note: string | undefined) => void) | undefined
  /**
   * For a directory whose last shutdown was clean and nothing started since:
   * the note that shutdown recorded (`shutdown(note)`); otherwise undefined.
   */
  cleanStartNote: string | undefined
  #lastSnapshot: EngineSnapshot | undefined
  readonly #guards: SessionGuards
  /** When the last request ended (performance.now()). */
  #idleSince = performance.now()
  /** When the request that opened the current transaction block started; undefined outside one. */
  #transactionSince: number | undefined
  readonly #checkpoints: CheckpointSchedule
  #checkpointing = false

  private constructor(blank: BlankModule, onLog: ((line: string) => void) | undefined, inMemory: boolean) {
    this.#blank = blank
    this.#inMemory = inMemory
    this.#checkpoints = new CheckpointSchedule(
      () => this.#mod.FS.readdir(`${PGDATA}/pg_wal`).length,
      SEGMENTS_PER_CHECKPOINT[inMemory ? 'memory' : 'directory'],
    )
    this.#pristineTable = tableLength(blank.control)
    this.#mod = blank.mod
    this.#wire = new RequestWire(() => blank.mod.HEAPU8)
    this.#control = blank.control
    this.#callbacks = blank.callbacks
    this.#log = blank.log
    this.#blob = blank.blob
    this.#guards = blank.guards
    this.#control.mayDeliverAlarm = () => this.#alarmMayGoOff()
    this.#control.cancelStatement = () => {
      this.#canceled = true
      this.#guards.requestCancel()
    }
    this.#control.untimedWait = (event, latch) => {
      if (!this.#inRequest || this.#dead || this.#closed) return
      // A latch set already (by a cancel or an alarm just delivered) ends the wait at once.
      if (latch !== 0 && new DataView(this.#mod.HEAPU8.buffer).getInt32(latch, true) !== 0) return
      this.#guards.raise(untimedWaitError(event))
    }
    this.#control.poll = (now) => {
      const control = this.#control
      control.pollAt = now + STOP_POLL_MS
      this.whileBusy?.()
      if (!this.stopWhen?.()) return
      control.pollAt = Infinity
      control.cancelStatement()
    }
    blank.bind(this.#wire)
    blank.setLogSink(onLog)
  }

  /** Creates the module, mounts the data directory and starts Postgres. */
  static async start(assets: EngineAssets, options: BackendOptions): Promise<Backend> {
    const blank = await BlankModule.create(
      assets,
      backendEnv(options.username, options.database),
      options.initialMemory ?? DEFAULT_MEMORY,
      options.mount.kind === 'node' ? options.mount.path : undefined,
    )
    const backend = new Backend(blank, options.onLog, options.mount.kind === 'memory')
    const mod = blank.mod
    try {
      if (options.prepare) {
        await options.prepare(mod)
        notePrepared(blank.control)
      }
      lockShippedTrees(mod)
      if (options.mount.kind === 'memory') materializeTree(mod, PGDATA, options.mount.tree)
      options.afterMount?.(mod)
      mod._pgl_setPGliteActive(1)
      const nodeDir = options.mount.kind === 'node' ? options.mount.path : undefined
      const clean = nodeDir === undefined ? undefined : readCleanShutdown(nodeDir, assets.engineVersion)
      backend.cleanStartNote = clean?.note
      let status: number
      try {
        status = withInitFilesKept(mod, PGDATA, clean?.keptInitFiles ?? new Set(), () => mod.callMain(['--single', ...options.startArgs, '-D', PGDATA, options.database]))
      } catch (cause) {
        throw new EngineError(`Postgres crashed while starting: ${explainCrash(blank.log, cause)}`, {
          code: 'STARTUP_FAILED',
          cause,
          log: blank.log.join('\n'),
        })
      }
      if (status !== EXIT_ALIVE) {
        throw new EngineError(`Postgres failed to start (exit code ${status}): ${blank.log.slice(-3).join(' | ')}`, {
          code: 'STARTUP_FAILED',
          log: blank.log.join('\n'),
        })
      }
      mod._pgl_startPGlite()
      backend.#setSessionUser(undefined, false)
      if (nodeDir !== undefined) backend.#recordOnShutdown = (note) => recordCleanShutdown(nodeDir, assets.engineVersion, note)
    } catch (err) {
      backend.#teardown()
      throw err
    }
    return backend
  }

  /**
   * Makes a blank module (created with the snapshot's memory size) an
   * independent copy of the snapshot's backend: no Postgres startup.
   */
  static restore(blank: BlankModule, snapshot: EngineSnapshot, onLog?: (line: string) => void): Backend {
    const backend = new Backend(blank, onLog, true)
    // A recycled module's lock belonged to its last database; a copy locks itself again.
    blank.guards.forgetSessionUser()
    blank.clients.reset()
    try {
      lockShippedTrees(blank.mod)
      restoreSnapshot(blank.mod, blank.control, snapshot)
      blank.clients.restored()
    } catch (cause) {
      backend.#teardown()
      throw new EngineError(`restoring a snapshot failed: ${String(cause)}`, { code: 'STARTUP_FAILED', cause })
    }
    return backend
  }

  /**
   * Captures this idle backend for {@link Backend.restore}. Kept until the
   * next request: cloning an unchanged source again (a seeded database per
   * test) copies nothing anew.
   */
  snapshot(): EngineSnapshot {
    this.#assertAlive()
    this.#lastSnapshot ??= this.#blank.clients.withoutHooks(() => takeSnapshot(this.#mod, this.#control))
    return this.#lastSnapshot
  }

  /**
   * Ends an in-memory backend without a Postgres shutdown (nothing of it is
   * kept, so a checkpoint would be wasted) and returns its module, reset,
   * for the next restore: what makes create-query-close cycles cheap. Returns
   * `undefined` (and changes nothing) when the module cannot be reused: a
   * directory mount, a dead engine, a side module loaded, or a memory that
   * grew past `RECYCLE_MAX_BYTES`.
   */
  recycle(): BlankModule | undefined {
    if (this.#closed || this.#dead || !this.#inMemory || !this.isSnapshotable || this.memoryBytes > RECYCLE_MAX_BYTES) return undefined
    try {
      resetForRestore(this.#mod, this.#control)
    } catch {
      this.#teardown()
      return undefined
    }
    this.#closed = true
    this.#wire.end()
    this.#log.length = 0
    this.#blob.clearInput()
    this.#blob.takeOutput()
    this.#blank.setLogSink(undefined)
    return this.#blank
  }

  /** Ends an in-memory backend whose module will not serve again: no shutdown (nothing of it is kept), no reset for reuse. */
  abandon(): void {
    this.#teardown()
  }

  /** The server client whose statements run from now on (see client-functions.ts); undefined for an in-process caller. */
  setClient(client: EngineClient | undefined): void {
    this.#blank.clients.setClient(client)
  }

  /** Releases the session-level advisory locks of a server client that left. */
  forgetClient(id: number): void {
    this.#blank.clients.forgetClient(id)
  }

  /** How many session advisory locks were let go of so far (a count that only grows). */
  get advisoryReleases(): number {
    return this.#blank.clients.releases
  }

  /** See `EngineLease.blockBoundCalls` (a count that only grows). */
  get blockBoundCalls(): number {
    return this.#blank.clients.blockBoundCalls
  }

  /** The key of the advisory lock last refused because another client holds it (55P03), once; undefined: none since. */
  takeRefusedLock(): string | undefined {
    const clients = this.#blank.clients
    const key = clients.refusedLock
    clients.refusedLock = undefined
    return key
  }

  /** The pids of the holders of session advisory lock `key` (client-functions.ts). */
  advisoryLockHolders(key: string): number[] {
    return this.#blank.clients.holders(key)
  }

  /**
   * How many statements so far may have changed what a prepared statement
   * refers to: DDL, `search_path`, the rollback of a transaction that ran
   * DDL (a count that only grows; engine/hooks/utility-hook.ts). A statement
   * cache prepares again when it moved since the statement was prepared.
   */
  get catalogChanges(): number {
    return this.#blank.clients.catalogChanges
  }

  /** What `pg_stat_activity` lists from now on (a server's clients); undefined: the engine's own backend. */
  set activity(rows: (() => readonly ActivityRow[] | undefined) | undefined) {
    this.#blank.clients.activity = rows
  }

  /** Ids of the server clients pg_terminate_backend() asked to end since the last call. */
  takeTerminations(): number[] {
    return this.#blank.clients.takeTerminations()
  }

  /**
   * Whether a snapshot taken now could be restored: no side module loaded
   * since start, or only the preloaded ones (contrib), whose links a restore
   * replays (dynamic-links.ts).
   */
  get isSnapshotable(): boolean {
    if (this.#dead || this.#closed) return false
    const links = this.#control.links
    return links.preparedTable !== undefined ? this.#inMemory && !links.unreplayable : tableLength(this.#control) === this.#pristineTable
  }

  /**
   * The ReadyForQuery status byte (I, T, E) that ended the last request's
   * output, or 0 when it did not end with one (an extended-protocol sequence
   * still waiting for its Sync, or an error that skips to the next Sync).
   */
  get lastReadyStatus(): number {
    return this.#wire.lastReadyStatus
  }

  /** Whether the session is inside a transaction block (BEGIN ... COMMIT). */
  get inTransaction(): boolean {
    return this.#mod._IsTransactionBlock() !== 0
  }

  /** The open transaction block's state, read between requests (transaction-block.ts); undefined outside one. */
  transactionBlock(): TransactionBlock | undefined {
    const exports = this.#control.instance?.exports
    if (this.#inRequest || this.#dead || this.#closed || !exports || !this.inTransaction) return undefined
    return readTransactionBlock(this.#mod, exports)
  }

  /**
   * The most bytes the engine's heap and in-memory files may take together
   * (undefined: no limit; memory-budget.ts).
   */
  set memoryLimit(bytes: number | undefined) {
    this.#control.budget.setLimit(bytes)
  }

  /** The heap in use and the in-memory files as a share of the memory limit (0 with none set). */
  memoryShare(): number {
    return this.#control.budget.share()
  }

  /** Whether the database lives in the module's own memory (nothing of it outlives the module). */
  get inMemory(): boolean {
    return this.#inMemory
  }

  /** Bytes of WASM linear memory currently allocated. */
  get memoryBytes(): number {
    return this.#mod.HEAPU8.byteLength
  }

  /** The engine's linear memory, as it is now (a new view after it grows). */
  get heap(): Uint8Array {
    this.#assertAlive()
    return this.#mod.HEAPU8
  }

  /**
   * Writes a file into the engine's file system as the host (the shipped
   * folders included), for SQL to read with server-side functions. A side
   * module written this way is not trusted: only `extensions` load.
   */
  writeFile(path: string, data: Uint8Array, mode: number): void {
    this.#assertAlive()
    const fs = this.#mod.FS
    asHost(this.#mod, () => {
      const slash = path.lastIndexOf('/')
      if (slash > 0) fs.mkdirTree(path.slice(0, slash))
      fs.writeFile(path, data)
      fs.chmod(path, mode)
    })
  }

  /** Postgres' last log lines. */
  get recentLog(): readonly string[] {
    return this.#log
  }

  get blob(): BlobDevice {
    return this.#blob
  }

  /** A copy of the data directory as files (take a CHECKPOINT first for a clean copy). */
  readDataTree(): DataTree {
    this.#assertAlive()
    return readTree(this.#mod.FS, PGDATA)
  }

  /** The engine died (trap or exit); every later request fails with this. */
  get deadError(): EngineError | undefined {
    return this.#dead
  }

  /**
   * Runs one request (one or more complete frontend messages) to the end,
   * handing every output chunk to `sink`. Throws EngineError if the engine
   * trapped or exited; the backend is then dead.
   */
  exec(message: Uint8Array, sink: ProtocolSink): void {
    this.#lastSnapshot = undefined
    this.#assertAlive()
    const mod = this.#mod
    this.#wire.begin(message, sink)
    const started = performance.now()
    this.#requestStarted = started
    this.requests++
    this.#inRequest = true
    if (this.timeLimitMs !== undefined) this.#control.cancelAt = started + this.timeLimitMs
    if (this.stopWhen !== undefined || this.whileBusy !== undefined) this.#control.pollAt = started + STOP_POLL_MS
    const topHandler = this.#guards.exceptionStack
    let failure: unknown
    try {
      while (this.#wire.hasInput || mod._pq_buffer_remaining_data() > 0) {
        const sp = mod.stackSave()
        try {
          mod._PostgresMainLoopOnce()
        } catch (e) {
          mod.stackRestore(sp)
          const thrown = isStackOverflow(e) ? stackDepthError(this.#guards, e, topHandler) : e
          mod.stackRestore(sp)
          if (isErrorExit(thrown)) {
            // An ERROR: Postgres' own recovery (abort, emit E, skip to Sync).
            recoverFromError(mod)
          } else {
            failure = thrown
            break
          }
        }
      }
      if (failure === undefined) {
        mod._PostgresSendReadyForQueryIfNecessary()
        mod._pgl_pq_flush()
      }
    } catch (e) {
      failure ??= e
    } finally {
      this.#wire.end()
      this.#inRequest = false
      this.#control.cancelAt = Infinity
      this.#control.pollAt = Infinity
      if (this.#canceled) {
        this.#canceled = false
        if (failure === undefined) this.#guards.clearCancel()
      }
    }
    if (failure !== undefined) this.#die(failure)
    const status = this.lastReadyStatus
    if (status === TxStatus.Idle) this.#transactionSince = undefined
    else if (status !== 0) this.#transactionSince ??= started
    this.#idleSince = performance.now()
    if (status === TxStatus.Idle && !this.#checkpointing && this.#checkpoints.due(this.#idleSince)) this.#checkpoint()
  }

  /** Runs a checkpoint as a request of its own, its reply unseen (wal-checkpoints.ts). */
  #checkpoint(): void {
    this.#checkpointing = true
    try {
      this.exec(CHECKPOINT_REQUEST, discard)
    } finally {
      this.#checkpointing = false
      if (!this.#dead) this.#checkpoints.ran()
    }
  }

  /**
   * Whether a due alarm may go off now (alarms.ts): only inside a request,
   * and only while no timeout that ends the session is set. Postgres' alarm
   * handler fires every timeout that is due, by its own clock, and those
   * (`transaction_timeout`, `idle_in_transaction_session_timeout`,
   * `idle_session_timeout`) would end the session, that is the engine every
   * caller shares; the host enforces them between requests instead.
   */
  #alarmMayGoOff(): boolean {
    if (!this.#inRequest || this.#dead || this.#closed) return false
    // The idle timeouts are armed only between requests (Postgres disables
    // them when a command arrives). A transaction_timeout that came due would
    // end the session, every caller's: the alarm goes off only while the
    // transaction is surely younger than it, counted from no later than
    // Postgres counts (the request, or the one that began the block).
    const transactionMs = this.#guards.timeoutMs('transaction_timeout')
    if (transactionMs <= 0) return true
    const deadline = (this.#transactionSince ?? this.#requestStarted) + transactionMs
    const now = performance.now()
    if (now < deadline - 1) return true
    // Past it a statement that began before it is canceled instead (57014), as nothing else would
    // stop it now. One that began after it is the caller's to refuse (the in-process API rolls back
    // with 25P04 before it runs; a server ends its client). A server (it set stopWhen) gets a moment
    // to end its client first between statements, as PostgreSQL would.
    const grace = this.stopWhen === undefined ? 0 : SERVER_TRANSACTION_GRACE_MS
    if (!this.#canceled && this.#requestStarted < deadline && now >= deadline + grace) this.#control.cancelStatement()
    return false
  }

  /**
   * A timeout that ran out while the session sat in a transaction block
   * between requests (alarms are never delivered: see `newModuleControl`).
   * The in-process API turns it into an ERROR that rolls back; the socket
   * server ends only the client that set it.
   */
  expiredTransactionTimeout(now = performance.now()): ExpiredTimeout | undefined {
    if (this.#transactionSince === undefined || this.#dead || this.#closed) return undefined
    const idle = this.#guards.timeoutMs('idle_in_transaction_session_timeout')
    if (idle > 0 && now - this.#idleSince >= idle) return { code: '25P03', setting: 'idle_in_transaction_session_timeout', ms: idle }
    const total = this.#guards.timeoutMs('transaction_timeout')
    if (total > 0 && now - this.#transactionSince >= total) return { code: '25P04', setting: 'transaction_timeout', ms: total }
    return undefined
  }

  /**
   * Runs the session as `role` from now on, for good: see
   * `SessionGuards.lockSessionUser`. Call between requests, outside a
   * transaction block. Throws EngineError `BAD_ROLE` when Postgres refused
   * the role (the session is as it was).
   */
  lockSessionUser(role: string): void {
    this.#setSessionUser(role, true)
  }

  /**
   * Makes `role` what the session user goes back to (RESET SESSION
   * AUTHORIZATION, DISCARD ALL), as a server's login does: a single-user
   * start leaves that value unset, and such a RESET did nothing.
   */
  #setSessionUser(role: string | undefined, lock: boolean): void {
    this.#assertAlive()
    const mod = this.#mod
    this.exec(BEGIN, discard)
    const sp = mod.stackSave()
    let refused = false
    try {
      // undefined: the user the session started as (single-user mode's, the OS user's role).
      this.#guards.setSessionUser(role ?? this.#guards.sessionUserName(), lock)
    } catch (e) {
      mod.stackRestore(sp)
      if (!isErrorExit(e)) this.#die(e)
      recoverFromError(mod)
      mod._PostgresSendReadyForQueryIfNecessary()
      mod._pgl_pq_flush()
      refused = true
    }
    this.exec(refused ? ROLLBACK : COMMIT, discard)
    if (refused) throw new EngineError(`Postgres refused "${role}" as the session user: ${this.#log.slice(-1).join('')}`, { code: 'BAD_ROLE' })
  }

  /** The role the session was locked to with {@link lockSessionUser}, if any. */
  get lockedSessionUser(): string | undefined {
    return this.#guards.lockedSessionUser
  }

  /** The session's timeout settings, in ms (0: off), as Postgres holds them now. */
  get sessionTimeouts(): SessionTimeouts {
    this.#assertAlive()
    const g = this.#guards
    return {
      idleInTransactionSessionTimeout: g.timeoutMs('idle_in_transaction_session_timeout'),
      idleSessionTimeout: g.timeoutMs('idle_session_timeout'),
      transactionTimeout: g.timeoutMs('transaction_timeout'),
      statementTimeout: g.timeoutMs('statement_timeout'),
    }
  }

  /** Processes a startup packet as a real server would (docs/engine.md). */
  startup(packet: Uint8Array, sink: ProtocolSink): void {
    this.#assertAlive()
    const mod = this.#mod
    this.#wire.begin(packet, sink)
    try {
      const port = mod._pgl_getMyProcPort()
      if (mod._ProcessStartupPacket(port, 1, 1) !== 0) {
        throw new EngineError('the startup packet was rejected', { code: 'ENGINE_EXIT' })
      }
      mod._pgl_sendConnData()
      mod._pgl_pq_flush()
    } catch (e) {
      if (e instanceof EngineError) throw e
      this.#die(e)
    } finally {
      this.#wire.end()
    }
  }

  #die(cause: unknown): never {
    const exited = isExitStatus(cause)
    // What happens to the instance is its owner's to say (PGlite reopens a directory database).
    const error = new EngineError(
      exited ? `the engine exited with status ${cause.status}: ${this.#log.slice(-2).join(' | ')}` : `the engine aborted (${String(cause)})`,
      { code: exited ? 'ENGINE_EXIT' : 'ENGINE_ABORT', cause, log: this.#log.join('\n') },
    )
    this.#dead = error
    this.#teardown()
    throw error
  }

  #assertAlive(): void {
    if (this.#dead) throw this.#dead
    if (this.#closed) throw new EngineError('the backend is shut down', { code: 'ENGINE_EXIT' })
  }

  /**
   * Shuts Postgres down with its shutdown checkpoint, so the next open needs
   * no recovery, then releases the module. Safe to call more than once.
   * @param note For a directory: kept for the next start, which reads it as
   *   `cleanStartNote` if nothing started the cluster in between.
   */
  shutdown(note?: string): void {
    if (this.#closed) return
    const mod = this.#mod
    const dead = this.#dead
    if (!dead) {
      try {
        mod._pgl_setPGliteActive(0)
        mod._pgl_run_atexit_funcs()
      } catch (e) {
        if (!(isExitStatus(e) && e.status === 0)) {
          this.#teardown()
          throw new EngineError('the engine failed during shutdown', { code: 'ENGINE_ABORT', cause: e })
        }
      }
    }
    this.#teardown()
    if (!dead) {
      try {
        this.#recordOnShutdown?.(note)
      } catch {
        // Without the marker the next start does all its work, as Postgres always did.
      }
    }
  }

  #teardown(): void {
    if (this.#closed) return
    this.#closed = true
    const mod = this.#mod
    this.#control.clearAll()
    try {
      for (const fp of this.#callbacks) mod.removeFunction(fp)
    } catch {
      // A dead module may refuse; its memory goes with it anyway.
    }
    try {
      mod.FS.quit()
    } catch {
      // Streams of a trapped module can be in any state.
    }
    try {
      mod._emscripten_force_exit(0)
    } catch {
      // Throws ExitStatus(0) by design (docs/engine.md).
    }
  }
}
