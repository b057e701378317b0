import { TxStatus } from '@pgwasm/pglite/protocol'
import { ProtocolError, collectGarbageSoon, type ActivityRow, type EngineLease, type LeaseClient, type UtilityRefusal } from '@pgwasm/pglite'
import { Handshake, type HandshakeHost } from './handshake.js'
import { CopyInScript, type ScriptEngine } from '../copy/copy-script.js'
import { SessionCopyIn, type CopyInHost } from './copy-in.js'
import { BatchWait, type BatchWaitHost } from './batch-wait.js'
import { ClientTimeouts, TIMEOUT_ERRORS, type TimeoutKind } from './client-timeouts.js'
import { ClientNames } from './client-names.js'
import { FrameLoop, type BatchMarks, type FrameLoopHost } from './frame-loop.js'
import { ClientActivity, type ActivitySource } from './client-activity.js'
import { ClientReports } from './client-reports.js'
import { ClientOutput } from './client-output.js'
import { FrameReader } from '../wire/frame-reader.js'
import { cleanUp, type LeavingClient } from './cleanup.js'
import { ListenRouting } from '../pooler/listen-routing.js'
import type { Multiplexer, MuxClient } from '../pooler/multiplexer.js'
import { OutputSplitter } from '../wire/output.js'
import { StatementRenamer } from '../wire/rename.js'
import { CacheGate } from './cache-gate.js'
import { LeaseObjectMemory } from './object-memory.js'
import { clientUtilityRules } from './utility-rules.js'
import { TransactionParking } from './transaction-parking.js'
import { LeaseScriptEngine } from '../copy/script-engine.js'
import { startupFromParams } from './startup.js'
import { NO_SETTINGS, startupSettings, type ClientSettings } from '../pooler/session-settings.js'
import { errorResponse, readyForQuery, statusLetter } from '../wire/wire.js'
import { newProcessKey, type SessionHost, type StartedElsewhere, type Transport } from './session-host.js'

// The server (net/) reaches a session through this module.
export { newProcessKey, type CancelTarget, type SessionHost, type StartedElsewhere, type Transport } from './session-host.js'

/** ReadyForQuery's status outside a transaction block. */
/**
 * The next request of a client waits while more than this of its output is
 * still unread by it: a slow reader holds at most this plus one request's output.
 */
const MAX_BACKLOG_BYTES = 4 * 1024 * 1024

/**
 * How long past its transaction_timeout a client's running statement may go
 * on before it is stopped: a client between short statements is ended by
 * its timer (FATAL 25P04 alone, as PostgreSQL sends it).
 */
const TRANSACTION_STOP_GRACE_MS = 100

/** What the parts of a session see of it, each through its own small interface. */
type SessionView = CopyInHost & FrameLoopHost & HandshakeHost & BatchWaitHost & LeavingClient & ActivitySource

/**
 * One client connection: its state, the pump that reads what it sends (the
 * handshake, then the frame loop), and the engine half of its batches on the
 * multiplexer. Reads are serial: bytes that arrive while a batch runs wait in
 * the buffer and form the next batch.
 */
export class Session implements MuxClient {
  readonly processId: number
  readonly leaseClient: LeaseClient
  /** The server's cap on one request of this client (MuxClient). */
  readonly timeLimitMs: number | undefined
  readonly secret: number
  /**
   * MuxClient: a CancelRequest, or the client leaving, stops its running
   * statement (never the cleanup that runs for it once it has left).
   */
  readonly stopRequested = (): boolean =>
    this.#state !== 'closed' &&
    (this.#host.canceledWhileRunning(this.processId, this.secret) ||
      // A streamed COPY reads the socket itself (and sees the client leave).
      (!this.#copy.streaming && (this.#transport.peerLeft?.() ?? false)) ||
      // Its transaction_timeout ran out while a statement runs: stopped here, the client ended after it.
      this.#timeouts.transactionExpired(TRANSACTION_STOP_GRACE_MS))
  readonly #host: SessionHost
  readonly #transport: Transport
  readonly #input: FrameReader
  readonly #frames: FrameLoop
  /** The batch {@link #runBatchWork} runs next (BatchWait.message), and whether it changes LISTENs. */
  readonly #waits: BatchWait
  #batchListens = false
  /** Whether the current batch's SQL may create a table although its tag reads SELECT (see sqlMayChangeMeaning). */
  #batchMeaning = false
  readonly #marks: BatchMarks = { namesStatement: false, closesObject: false, objectsMayChange: false, activitySql: new Uint8Array(0) }
  /** What this client's prepared statements and cursors hold of the engine's memory ceiling. */
  readonly #objectMemory = new LeaseObjectMemory((key) => this.#mux?.objects.claim(key, this))
  readonly #cacheGate: CacheGate
  #state: 'startup' | 'auth' | 'attach' | 'ready' | 'closed' = 'startup'
  #pumping = false
  /** Counts receive() calls: bytes that came while a read made no progress make it read again. */
  #arrivals = 0
  readonly #handshake: Handshake
  #mux: Multiplexer | undefined
  readonly #renamer: StatementRenamer
  readonly #splitter = new OutputSplitter()
  readonly #output: ClientOutput
  #listens: ListenRouting | undefined
  /** The client is in a transaction block (as it was told: the engine may hold it parked, see transaction-parking.ts). */
  #inTransaction = false
  readonly #parking = new TransactionParking()
  #unsynced = false
  /** Last ReadyForQuery status byte (I, T or E) this client was sent. */
  #status: number = TxStatus.Idle
  readonly #copy: SessionCopyIn
  /** Bytes a peerLeft probe read during a request, not yet received: they come before anything the socket reads later. */
  readonly #early: Uint8Array[] = []
  readonly #timeouts: ClientTimeouts
  readonly #names: ClientNames
  #cleanedUp: Promise<void> | undefined
  readonly #view: SessionView

  /** `started`: a client the cancel helper started while this thread was busy (it skips startup). */
  constructor(host: SessionHost, transport: Transport, started?: StartedElsewhere) {
    const key = started ?? newProcessKey()
    this.processId = key.processId
    this.secret = key.secret
    const utilityRules = clientUtilityRules(this.processId, {
      heard: (kind, channel) => {
        // Dynamic SQL's LISTEN and UNLISTEN route too; others' LISTENs come back after the batch.
        this.#listens?.heard(kind, channel)
        this.#batchListens = true
      },
      // A function's set_config() or dynamic SET: the settings are read after the batch.
      settingChanged: () => (this.#splitter.meaningMayChange = true),
      objectMade: this.#objectMemory.made,
      objectDropped: this.#objectMemory.dropped,
      othersCursor: (name) => this.#mux?.objects.isOthersCursor(name, this) ?? false,
    })
    this.leaseClient = {
      id: this.processId,
      pid: this.processId,
      checkUtility: (statement) => {
        this.#parking.noteUtility(statement.tag)
        return utilityRules(statement)
      },
      signalOther: (pid, signal) => this.#host.signal(pid, signal),
      statementName: (name) => this.#renamer.sqlName(name),
    }
    this.#host = host
    this.#transport = transport
    this.#input = new FrameReader(host.maxMessageBytes)
    this.#renamer = new StatementRenamer(`c${this.processId}_`, (name) => this.#mux?.objects.isOthersCursor(name, this) ?? false)
    this.#cacheGate = new CacheGate(`c${this.processId}`, host.maxMessageBytes, this.#renamer.statements, this.#splitter)
    this.#output = new ClientOutput(this.#splitter, this.#cacheGate, transport, () => this.#state === 'closed')
    this.#names = new ClientNames(`c${this.processId}`, this.#renamer)
    this.#splitter.rewriteError = this.#names.rewriteError
    this.#timeouts = new ClientTimeouts(host.idleInTransactionTimeoutMs, this.#expire)
    this.timeLimitMs = host.maxStatementMs > 0 ? host.maxStatementMs : undefined
    const session = this
    const view: SessionView = {
      client: this,
      processId: this.processId,
      input: this.#input,
      transport,
      server: host,
      timeLimitMs: this.timeLimitMs,
      renamer: this.#renamer,
      cacheGate: this.#cacheGate,
      marks: this.#marks,
      parking: this.#parking,
      get copy() {
        return session.#copy
      },
      get mux() {
        return session.#mux
      },
      get status() {
        return session.#status
      },
      get inTransaction() {
        return session.#inTransaction
      },
      get unsynced() {
        return session.#unsynced
      },
      set unsynced(value: boolean) {
        session.#unsynced = value
      },
      rewriteClient: {
        processId: this.processId,
        get inTransaction() {
          return session.#inTransaction
        },
        othersObjects: () => this.#mux!.objects.othersOf(this),
      },
      isClosed: () => this.#state === 'closed',
      isReady: () => this.#state === 'ready',
      close: () => this.#close(),
      fatal: (code, message) => this.#fatal(code, message),
      takeEarly: () => this.#early.splice(0),
      canceled: () => host.canceledWhileRunning(this.processId, this.secret),
      skipToSync: () => this.#frames.skipToSync(),
      runScript: (script, listenChanged, step, settled) => this.#runScript(script, listenChanged, step, settled),
      noteListens: (sql) => this.#listens!.note(sql),
      runBatch: (message, listenChanged, meaning) => this.#runBatch(message, listenChanged, meaning),
      // Its startup parameters are its first settings (put on the session with its first batch).
      startup: (request) => {
        this.settings = startupSettings(request.params)
        // Under the role option every client is that role, and gets its stored settings.
        this.loginUser = host.role ?? request.params.get('user') ?? 'postgres'
      },
      get reports() {
        return session.#reports
      },
      get applicationName() {
        return session.#handshake.applicationName
      },
      get listens() {
        return session.#listens
      },
      settled: () => {
        this.#setStatus(TxStatus.Idle)
        this.#unsynced = false
      },
      enter: (phase) => (this.#state = phase),
      attached: (mux) => {
        this.#mux = mux
        this.#listens = new ListenRouting(mux, this)
      },
      ready: () => {
        this.#state = 'ready'
        this.#transport.write(this.#reports.startupReply(this.processId, this.secret))
        void this.#pump()
      },
    }
    this.#view = view
    this.#copy = new SessionCopyIn(view)
    this.#frames = new FrameLoop(view)
    this.#waits = new BatchWait(view)
    host.track(this)
    this.#handshake = new Handshake(view, started !== undefined)
    this.#reports = new ClientReports(started?.told)
    if (started) {
      this.#handshake.begin(startupFromParams(started.params))
    }
  }

  /** A timeout of this client ran out: end it as PostgreSQL would (the cleanup rolls it back). */
  readonly #expire = (kind: TimeoutKind): void => {
    const { code, message } = TIMEOUT_ERRORS[kind]
    this.#host.log(`session ${this.processId}: ${message}`)
    this.#fatal(code, message)
  }

  get pinned(): boolean {
    return this.#state !== 'closed' && ((this.#inTransaction && !this.#parking.parked) || this.#unsynced)
  }

  /**
   * MuxClient: another client waits while this one, between statements,
   * holds the engine in a block that may be parked (transaction-parking.ts).
   * True when it was: the engine may go to the others.
   */
  park(lease: EngineLease): boolean {
    return !this.#waits.active && this.#parkBlock(lease)
  }

  /** Parks its block if it is idle between statements, with no more of its input here. */
  #parkBlock(lease: EngineLease): boolean {
    const copy = this.#copy
    if (this.#state !== 'ready' || this.#status !== TxStatus.InBlock || this.#unsynced || this.#input.buffered > 0) return false
    if (copy.waiting || copy.streaming || copy.extendedPending) return false
    return this.#parking.park(lease)
  }

  get isClosed(): boolean {
    return this.#state === 'closed'
  }

  get closed(): boolean {
    return this.#state === 'closed'
  }

  /** This client's own session settings (MuxClient). */
  settings: ClientSettings = NO_SETTINGS
  /** Its last batch may have changed one (MuxClient). */
  settingsChanged = false
  /** Until its first batch: the user whose stored settings it gets (MuxClient). */
  loginUser: string | undefined
  readonly #activity = new ClientActivity()
  /** Set by the multiplexer when it put back settings others had changed (MuxClient). */
  reportDue = false
  readonly #reports: ClientReports

  /** Bytes received from the client and not yet taken: a message still arriving, or frames waiting for the engine. */
  get heldInputBytes(): number {
    return this.#input.buffered
  }

  /** Bytes from the client. */
  receive(bytes: Uint8Array): void {
    if (this.#state === 'closed') return
    this.#timeouts.busy()
    this.#input.append(bytes)
    this.#arrivals++
    void this.#pump()
  }

  /**
   * Bytes read from the socket while a request ran (peerLeft): received
   * once the request is over, and taken before the socket's by a COPY that
   * streams meanwhile.
   */
  receiveEarly(bytes: Uint8Array): void {
    if (this.#early.push(bytes) > 1) return
    queueMicrotask(() => {
      for (const chunk of this.#early.splice(0)) this.receive(chunk)
    })
  }

  /** Ends the connection with a FATAL error: `pg_terminate_backend()` of this client's pid. */
  terminate(code: string, message: string): void {
    this.#fatal(code, message)
  }

  deliverNotification(notification: Uint8Array): void {
    if (this.#state === 'ready') this.#transport.write(notification)
  }

  async #pump(): Promise<void> {
    if (this.#pumping) return
    this.#pumping = true
    try {
      while (this.#state !== 'closed' && this.#input.buffered > 0) {
        const state = this.#state
        if (state === 'attach') break
        if (state === 'ready' && (this.#transport.backlogBytes ?? 0) > MAX_BACKLOG_BYTES && this.#transport.drained) {
          // Backpressure: no new request while the client has not read the last ones.
          this.#waitForClient()
          await this.#transport.drained()
          this.#timeouts.busy()
          continue
        }
        const arrivals = this.#arrivals
        const progressed = state === 'startup' ? this.#handshake.readStartup() : state === 'auth' ? await this.#handshake.readAuth() : await this.#frames.read()
        if (!progressed && arrivals === this.#arrivals) break
      }
    } catch (err) {
      if (err instanceof ProtocolError) {
        // Framing that cannot be trusted any more: Postgres ends the connection too.
        this.#fatal('08P01', err.message)
      } else {
        this.#host.log(`session ${this.processId}: ${String(err)}`)
        this.#fatal('XX000', `internal error: ${err instanceof Error ? err.message : String(err)}`)
      }
    } finally {
      this.#pumping = false
    }
    // No batch holds views of the input now: a buffer grown for a large message can go.
    if (this.#input.trim()) collectGarbageSoon()
    this.#waitForClient()
  }

  /** The client's turn to send: its idle timeouts run until it does. */
  #waitForClient(): void {
    if (this.#state !== 'ready') return
    this.#timeouts.idle(this.#inTransaction, this.#mux!.idleSessionTimeoutMs)
  }

  /** A CancelRequest for this client (CancelTarget): see BatchWait.cancel; a cached-statement batch is not canceled. */
  cancelWaiting(): boolean {
    return !this.#cacheGate.active && this.#waits.cancel()
  }

  #runBatch(message: Uint8Array, listenChanged: boolean, meaning = false): Promise<void> {
    this.#batchListens = listenChanged
    this.#batchMeaning = meaning
    return this.#waits.run(message, this.#runBatchWork)
  }

  /** The engine half of {@link #runBatch}, made once: no closure per batch. */
  readonly #runBatchWork = (lease: EngineLease): void => {
    // Closed while waiting for the engine: the cleanup owns what is left.
    if (this.#state === 'closed') return
    const startedAt = performance.now()
    this.#parking.beforeBatch(lease, this.#inTransaction)
    this.#activity.queryStarted()
    const marks = this.#marks
    const refusal = this.#objectMemory.admit(lease, marks.namesStatement, marks.closesObject)
    marks.namesStatement = marks.closesObject = false
    if (refusal) {
      this.#refuseNewStatement(refusal)
      return
    }
    this.#objectMemory.running(lease)
    const splitter = this.#splitter
    splitter.lastStatus = 0
    const wasInTransaction = this.#inTransaction
    const watchObjects = marks.objectsMayChange
    try {
      if (watchObjects) this.#mux!.objects.before(lease)
      const message = this.#cacheGate.messageFor(lease, this.#waits.message, this.#mux!.cacheEpoch)
      if (!this.#waits.execute(lease, message, this.#output.fromEngine)) {
        // Its advisory lock was busy: nothing reached the client; it runs again once the lock is free.
        this.#objectMemory.settle(lease)
        return
      }
      this.#cacheGate.settle(lease, this.#output.fromEngine)
      this.#noteMeaning(this.#batchMeaning, lease)
      if ((this.settingsChanged || this.reportDue || this.#reports.pending) && !this.#unsynced && this.#reports.report(lease, splitter)) this.reportDue = false
      // Read at a Sync point only: a Query in the middle of an extended sequence would end it.
      if (watchObjects && !this.#unsynced) {
        this.#mux!.objects.after(lease, this)
        marks.objectsMayChange = false
      }
      // An UNLISTEN by this client must not end another client's LISTEN.
      if (this.#batchListens) this.#listens!.relisten(lease)
    } catch (err) {
      this.#engineFailed(err)
    }
    this.#objectMemory.settle(lease)
    if (splitter.lastStatus !== 0) this.#setStatus(splitter.lastStatus)
    // Stopped for its transaction_timeout (stopRequested): ended as PostgreSQL ends it, before the
    // rolled-back SET LOCAL could clear the timer.
    if (wasInTransaction && this.#timeouts.transactionExpired(TRANSACTION_STOP_GRACE_MS)) queueMicrotask(() => this.#expire('transaction'))
    else if (this.#inTransaction || wasInTransaction) this.#noteTransaction(lease, wasInTransaction, startedAt)
    if (this.#mux!.endTerminated(lease, this)) {
      // pg_terminate_backend(pg_backend_pid()): the statement fails with the FATAL, as on PostgreSQL.
      // Ended once the engine is given back (its cleanup needs the engine).
      this.#splitter.take()
      queueMicrotask(() => this.terminate('57P01', 'terminating connection due to administrator command'))
      return
    }
    this.#output.flush()
    // Others wait for the engine: a block that may be parked lets it go now (the multiplexer releases it).
    if (this.#inTransaction && this.#mux!.othersWait) this.#parkBlock(lease)
  }

  /**
   * A batch that makes a named prepared statement past this client's share
   * of the engine's `maxMemory` (object-memory.ts): refused whole with 53200
   * before it runs, as the engine refuses its `PREPARE` then.
   */
  #refuseNewStatement(refusal: UtilityRefusal): void {
    this.#output.send(errorResponse(refusal.code, refusal.message, 'ERROR', undefined, refusal.hint))
    if (this.#unsynced) this.#frames.skipToSync()
    else this.#output.send(readyForQuery(statusLetter(this.#status)))
  }

  /** After a request of a client that is or was in a transaction block: its timeouts as the engine has them now. */
  #noteTransaction(lease: EngineLease, wasInTransaction: boolean, startedAt: number): void {
    if (this.#inTransaction) {
      this.#timeouts.inTransaction(lease.sessionTimeouts, !wasInTransaction, startedAt)
    } else {
      this.#timeouts.outOfTransaction()
      // A SET in the block may have been rolled back, or committed for everyone.
      this.#mux!.readSettings(lease)
    }
  }

  /**
   * Runs one step of a COPY script with the engine held. While the script
   * waits for data inside a transaction the session stays pinned, as a
   * client in a transaction block keeps its backend.
   */
  async #runScript(
    script: CopyInScript,
    listenChanged: boolean,
    step: (engine: ScriptEngine) => boolean,
    settled: (waiting: boolean) => void,
  ): Promise<void> {
    await this.#mux!.run(this, (lease) => {
      if (this.#state === 'closed') return
      const startedAt = performance.now()
      this.#parking.beforeBatch(lease, this.#inTransaction)
      let waiting = false
      const wasInTransaction = this.#inTransaction
      this.#objectMemory.running(lease)
      try {
        waiting = step(new LeaseScriptEngine(lease, this.#splitter, this.#output.fromEngine, this.#output.send, this.#status))
        // A query string holding COPY can hold anything else too.
        this.#noteMeaning(true, lease)
        if (!waiting && listenChanged) this.#listens!.relisten(lease)
      } catch (err) {
        this.#engineFailed(err)
      }
      this.#objectMemory.settle(lease)
      this.#setStatus(script.status)
      if (this.#inTransaction || wasInTransaction) this.#noteTransaction(lease, wasInTransaction, startedAt)
      this.#output.flush()
      settled(waiting)
    })
  }

  /** Moves the multiplexer's cache epoch on after engine work that may change what SQL means. */
  #noteMeaning(sqlSaysSo: boolean, lease?: EngineLease): void {
    const splitter = this.#splitter
    if (sqlSaysSo || splitter.meaningMayChange) {
      this.settingsChanged = true
      this.#mux!.cacheEpoch++
      // It may have been a SET of idle_session_timeout, shared by every client.
      if (lease) this.#mux!.readSettings(lease)
    }
    splitter.meaningMayChange = false
  }

  #engineFailed(err: unknown): never {
    this.#output.flush()
    if (err instanceof ProtocolError) this.#fatal('08P01', err.message)
    else this.#fatal('XX000', `the database failed: ${err instanceof Error ? err.message : String(err)}`)
    throw err
  }

  #setStatus(status: number): void {
    this.#activity.statusChanged(this.#status, status)
    this.#status = status
    this.#inTransaction = status !== TxStatus.Idle
    if (!this.#inTransaction) this.#parking.ended()
  }

  /** Its row of `pg_stat_activity` (MuxClient); `running`: its statement is the one the engine runs. */
  activity(running: boolean): ActivityRow {
    return this.#activity.row(this.#view, running, !running && this.#waits.active)
  }


  #fatal(code: string, message: string): void {
    if (this.#state === 'closed') return
    this.#transport.write(errorResponse(code, message, 'FATAL'))
    this.#close()
  }

  /** The connection ended or must end: give the engine back clean. */
  #close(): void {
    if (this.#state === 'closed') return
    this.#state = 'closed'
    this.#host.untrack(this)
    this.#frames.stop()
    this.#timeouts.stop()
    this.#handshake.stopTimer()
    // What it held for the engine goes now, not when the socket object does.
    if (this.#input.release()) collectGarbageSoon()
    this.#copy.release()
    this.#cacheGate.release()
    this.#transport.end()
    void this.cleanup()
  }

  /** Called by the transport when the peer went away. */
  disconnected(): void {
    this.#close()
  }

  /** Gives the engine back as the departed client should leave it, once (cleanUp in cleanup.ts). */
  cleanup(): Promise<void> {
    this.#cleanedUp ??= this.#mux ? cleanUp(this.#mux, this.#view, this.#handshake.database) : Promise.resolve()
    return this.#cleanedUp
  }
}
