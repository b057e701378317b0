import type { EngineAssets } from './assets.js'
import { deliverAlarmsWhileWorking } from './alarms.js'
import { untimedWaitError } from './untimed-waits.js'
import { capLogLines } from './log-lines.js'
import { isExitStatus, type PostgresModule } from './emscripten.js'
import { EngineError } from './engine-error.js'
import {
  installFastPreload,
  INITDB_EXE,
  PGDATA,
  POSTGRES_EXE,
  backendEnv,
  createMemory,
  asHost,
  installProcessHooks,
  instantiateWith,
  lockShippedTrees,
  newModuleControl,
  preloadedPackage,
  type ModuleControl,
} from './module.js'
import { resetForRestore, restoreSnapshot, tableLength, takeSnapshot, type EngineSnapshot } from './snapshot.js'
import { materializeTree, readTree, watchMemoryFiles, type DataTree } from './pgdata-tree.js'
import { registerBlobDevice, type BlobDevice } from './blob-device.js'
import { adoptTrust, guardDlopen, moduleFileRefusal, SideModuleTrust } from './side-module-guard.js'
import { supplyMissingImports } from './missing-imports.js'
import { encodingConversions } from './encoding-conversions.js'
import { guardSqlFileWrites } from './file-write-guard.js'
import { ClientFunctions, type EngineClient } from './client-functions.js'
import type { ActivityRow } from './activity-report.js'
import { catchStackOverflows, isStackOverflow, SessionGuards } from './session-guards.js'
import { notePrepared, recordDynamicLinks } from './dynamic-links.js'
import { readCleanShutdown, recordCleanShutdown, withInitFilesKept } from './clean-shutdown.js'
import { nodeBuiltin } from './node-builtin.js'
import { CHECKPOINT_REQUEST, CheckpointSchedule, SEGMENTS_PER_CHECKPOINT } from './wal-checkpoints.js'
import { FrameWriter } from './frame-writer.js'
import { Backend as BackendMessage, TxStatus } from './message-codes.js'
import { copyInData } from './frontend-frames.js'

/** What the engine writes to: one chunk of backend wire bytes at a time. */
export interface ProtocolSink {
  /** `bytes` is a view into WASM memory, valid only during the call. */
  onChunk(bytes: Uint8Array): void
}

export type DataDirMount =
  | { readonly kind: 'memory'; readonly tree: DataTree }
  | { readonly kind: 'node'; readonly path: string }

export interface BackendOptions {
  readonly mount: DataDirMount
  readonly username: string
  readonly database: string
  /** Postgres command-line arguments after `--single`, before `-D`. */
  readonly startArgs: readonly string[]
  readonly initialMemory?: number
  readonly onLog?: (line: string) => void
  /**
   * Runs on the created module before Postgres starts (contrib files and
   * side modules). The table's length after it is noted: snapshots of the
   * backend then carry the links Postgres makes (dynamic-links.ts), and a
   * restore needs a module prepared the same way.
   */
  readonly prepare?: (mod: PostgresModule) => Promise<void>
  /** Runs once the data directory is in place, before Postgres starts (e.g. to journal its changes). */
  readonly afterMount?: (mod: PostgresModule) => void
}

/** Room in the heap for what is not in a memory context (libc's own allocations, the stack's guard). */
const HEAP_OUTSIDE_CONTEXTS = 32 * 1024 * 1024

/** What of `mod`'s heap is in use: static data, Postgres' memory contexts' blocks, and a margin. */
function heapInUse(mod: PostgresModule, instance: WebAssembly.Instance): () => number {
  const ex = instance.exports
  const allocated = ex.MemoryContextMemAllocated as ((context: number, recurse: number) => number) | undefined
  const top = (ex.TopMemoryContext as WebAssembly.Global | undefined)?.value as number | undefined
  const heapBase = (ex.__heap_base as WebAssembly.Global).value as number
  return () => {
    const context = top === undefined ? 0 : new DataView(mod.HEAPU8.buffer).getUint32(top, true)
    if (!allocated || context === 0) return mod.HEAPU8.byteLength
    return Math.min(mod.HEAPU8.byteLength, heapBase + (allocated(context, 1) >>> 0) + HEAP_OUTSIDE_CONTEXTS)
  }
}

/** `callMain` returns this when the backend is up and waiting (docs/engine.md). */
const EXIT_ALIVE = 99
/** The patched top-level longjmp after an ERROR exits with this (docs/engine.md). */
const EXIT_LONGJMP = 100
/**
 * A module whose memory grew past this is not reused: WASM memory never
 * shrinks, so the next database would hold (and, under a `maxMemory`,
 * count) what one large statement of the last one took. Modules start at
 * 128 MiB and most stay there.
 */
const RECYCLE_MAX_BYTES = 256 * 1024 * 1024
/** How long past a transaction_timeout a server's statement runs before the engine cancels it. */
const SERVER_TRANSACTION_GRACE_MS = 100
/** Error recovery passes in a row before an ERROR inside recovery is taken as the engine failing. */
const RECOVERY_PASSES = 4
const LOG_LINES_KEPT = 40
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
const COPY_FAIL = new FrameWriter().copyFail('COPY FROM STDIN data must come in the same request as the COPY').view().slice()
const SYNC = new FrameWriter().sync().view().slice()

type NodeFsSync = { fsyncSync(fd: number): void; fdatasyncSync(fd: number): void }
type NodeStream = { nfd?: number }

function nodeFs(): NodeFsSync {
  return nodeBuiltin<NodeFsSync>('node:fs')
}

/**
 * The glue's NODEFS has no fsync and its fdatasync only checks the
 * descriptor: a commit would reach the OS page cache but not the disk. Route
 * both to the real calls, so `fsync=on` means what it says (WAL commits use
 * fdatasync, checkpoints fsync).
 */
function nodeSyncOverrides(mod: () => PostgresModule | undefined): Record<string, unknown> {
  return {
    __syscall_fdatasync: (fd: number): number => {
      const stream = (mod()?.FS as unknown as { getStream(fd: number): NodeStream | null } | undefined)?.getStream(fd)
      if (!stream) return -8 /* EBADF */
      if (stream.nfd !== undefined) nodeFs().fdatasyncSync(stream.nfd)
      return 0
    },
  }
}

function makeNodeFsDurable(mod: PostgresModule): void {
  const ops = (mod.NODEFS as { stream_ops: Record<string, unknown> }).stream_ops
  ops.fsync = (stream: NodeStream): number => {
    if (stream.nfd !== undefined) nodeFs().fsyncSync(stream.nfd)
    return 0
  }
}

/**
 * What a crash says to a user: Postgres' PANIC or FATAL lines (the abort
 * itself only says `Aborted()`), and what can be done about a damaged
 * data directory.
 */
function explainCrash(log: readonly string[], cause: unknown): string {
  const lines = log.filter((line) => /\b(PANIC|FATAL):/.test(line)).map((line) => line.replace(/^.*?\b(PANIC|FATAL):\s*/, '$1: '))
  if (lines.length === 0) return String(cause)
  const damaged = lines.some((line) => /pg_control|checkpoint record|WAL|invalid|could not read|could not open|corrupt/i.test(line))
  const advice = damaged
    ? ' The data directory is damaged or incomplete (a file was truncated, removed or overwritten): restore it from a backup or a dump (dumpDataDir, pgwasm-dump); it cannot be opened as it is.'
    : ''
  return `${lines.slice(-3).join(' | ')}.${advice}`
}

/** A session timeout that ran out between two requests. */
export interface ExpiredTimeout {
  /** The SQLSTATE Postgres uses for it: 25P03 (idle in transaction) or 25P04 (transaction). */
  readonly code: '25P03' | '25P04'
  readonly setting: 'idle_in_transaction_session_timeout' | 'transaction_timeout'
  readonly ms: number
}

/** The timeout settings of the session, in ms; 0 means off. */
export interface SessionTimeouts {
  readonly idleInTransactionSessionTimeout: number
  readonly idleSessionTimeout: number
  readonly transactionTimeout: number
  readonly statementTimeout: number
}

/** An empty sink for requests whose output nobody reads. */
const discard: ProtocolSink = { onChunk() {} }

/**
 * A runtime-initialized module in which Postgres has not run yet: what
 * `Backend.start` boots and `Backend.restore` fills from a snapshot.
 */
export class BlankModule {
  constructor(
    readonly mod: PostgresModule,
    readonly control: ModuleControl,
    readonly guards: SessionGuards,
    readonly clients: ClientFunctions,
    readonly callbacks: number[],
    readonly log: string[],
    readonly blob: BlobDevice,
    readonly bind: (backend: Backend) => void,
    readonly setLogSink: (sink: ((line: string) => void) | undefined) => void,
  ) {}

  /** Creates the module: instantiate, runtime init, `pglite.data`, callbacks. */
  static async create(assets: EngineAssets, env: Record<string, string>, memoryBytes: number, mountPath?: string): Promise<BlankModule> {
    const log: string[] = []
    let logSink: ((line: string) => void) | undefined
    const pushLog = (line: string): void => {
      if (log.length >= LOG_LINES_KEPT) log.shift()
      log.push(line)
      logSink?.(line)
    }
    const control = newModuleControl()
    let target: Backend | undefined
    const callbacks: number[] = []
    let blob: BlobDevice | undefined
    let created: PostgresModule | undefined
    const overrides = mountPath === undefined ? {} : nodeSyncOverrides(() => created)
    const trust = new SideModuleTrust(assets.interruptPollSlot)
    let guards: SessionGuards | undefined
    let clients: ClientFunctions | undefined
    const memory = createMemory(memoryBytes)
    const mod = await assets.postgresFactory({
      thisProgram: POSTGRES_EXE,
      arguments: [],
      noExitRuntime: true,
      wasmMemory: memory,
      instantiateWasm: instantiateWith<PostgresModule>(assets.pgliteModule, control, overrides, (env, imports) => {
        deliverAlarmsWhileWorking(imports, control)
        const engine = { module: () => created, exports: () => control.instance?.exports }
        supplyMissingImports(env, engine, trust, encodingConversions(engine))
        guardDlopen(env, trust, () => created, () => control.instance?.exports)
        recordDynamicLinks(env, control.links, () => created, () => control.instance?.exports.__indirect_function_table as WebAssembly.Table | undefined)
        catchStackOverflows(env, memory, () => guards)
        guardSqlFileWrites(env, () => created, () => guards)
      }),
      getPreloadedPackage: preloadedPackage(assets),
      print: pushLog,
      printErr: pushLog,
      stdin: () => null,
      preRun: [
        (m) => {
          adoptTrust(m, trust)
          control.budget.attach(m)
          watchMemoryFiles(m)
          installFastPreload(m, assets.lazyFiles)
          Object.assign(m.ENV, env)
          blob = registerBlobDevice(m)
          if (mountPath !== undefined) {
            m.FS.mkdirTree(PGDATA)
            m.FS.mount(m.NODEFS, { root: mountPath }, PGDATA)
          }
          ;(m as unknown as { onRuntimeInitialized: () => void }).onRuntimeInitialized = () => {
            callbacks.push(...installProcessHooks(m))
            capLogLines(m)
            guards = new SessionGuards(m, control.instance!, assets.pgliteModule, (path) => moduleFileRefusal(m, trust, path), assets.guardRecords)
            guards.install()
            callbacks.push(...guards.callbacks)
            control.budget.heapInUse = heapInUse(m, control.instance!)
            clients = new ClientFunctions(m, control.instance!, assets.pgliteModule, guards, assets.guardRecords)
            clients.install()
            callbacks.push(...clients.callbacks)
            // Registered once; each forwards to whatever the current request set.
            const read = m.addFunction((ptr: number, max: number) => target!.onRead(ptr, max), 'ipi')
            const write = m.addFunction((ptr: number, length: number) => target!.onWrite(ptr, length), 'ipi')
            callbacks.push(read, write)
            m._pgl_set_rw_cbs(read, write)
          }
        },
      ],
    })
    created = mod
    if (mountPath !== undefined) makeNodeFsDurable(mod)
    mod.FS.chmod('/home/postgres/.pgpass', 0o600)
    mod.FS.chmod(INITDB_EXE, 0o555)
    mod.FS.chmod(POSTGRES_EXE, 0o555)
    return new BlankModule(
      mod,
      control,
      guards!,
      clients!,
      callbacks,
      log,
      blob!,
      (backend) => {
        target = backend
      },
      (sink) => {
        logSink = sink
      },
    )
  }

  /** Releases a module that will never run (e.g. a pooled one at exit). */
  discard(): void {
    this.control.clearAll()
    try {
      this.mod._emscripten_force_exit(0)
    } catch {
      // Throws ExitStatus(0) by design.
    }
  }
}

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
  #sink: ProtocolSink = discard
  #input: Uint8Array = new Uint8Array(0)
  #readOffset = 0
  #starved = 0
  readonly #tail = new Uint8Array(6)
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
  copyInSource: (() => Uint8Array | undefined) | undefined
  /** The request's COPY data ended (CopyDone or CopyFail given): ask the source no more. */
  #copyInEnded = false
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
    blank.bind(this)
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
    this.#sink = discard
    this.#input = new Uint8Array(0)
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
   * DDL (a count that only grows; engine/utility-hook.ts). A statement
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


  /** @internal Read callback of the engine. */
  onRead(ptr: number, max: number): number {
    if (this.#readOffset >= this.#input.length && !this.#moreCopyIn()) this.#starve()
    const remaining = this.#input.length - this.#readOffset
    const length = remaining < max ? remaining : max
    if (length <= 0) return 0
    this.#mod.HEAPU8.set(this.#input.subarray(this.#readOffset, this.#readOffset + length), ptr)
    this.#readOffset += length
    return length
  }

  /** @internal Write callback of the engine. */
  onWrite(ptr: number, length: number): number {
    // HEAPU8 is re-created when memory grows: read it fresh on every call.
    const bytes = this.#mod.HEAPU8.subarray(ptr, ptr + length)
    this.#sink.onChunk(bytes)
    // Keep the last 6 bytes: a request ends with ReadyForQuery (Z, length 5, status).
    if (length >= 6) this.#tail.set(bytes.subarray(length - 6))
    else {
      this.#tail.copyWithin(0, length)
      this.#tail.set(bytes, 6 - length)
    }
    return length
  }

  /**
   * The ReadyForQuery status byte (I, T, E) that ended the last request's
   * output, or 0 when it did not end with one (an extended-protocol sequence
   * still waiting for its Sync, or an error that skips to the next Sync).
   */
  get lastReadyStatus(): number {
    const t = this.#tail
    return t[0] === BackendMessage.ReadyForQuery && t[1] === 0 && t[2] === 0 && t[3] === 0 && t[4] === 5 ? t[5]! : 0
  }

  /**
   * Takes the next COPY data from {@link copyInSource}. Only whole CopyData
   * frames, with at most a CopyDone or CopyFail at the end, reach Postgres:
   * any other message would end the backend that every caller shares.
   * @returns false when there is none (the COPY then fails).
   */
  #moreCopyIn(): boolean {
    const source = this.copyInSource
    if (!source || this.#copyInEnded || this.#starved > 0) return false
    let next: Uint8Array | undefined
    try {
      next = source()
    } catch {
      next = undefined
    }
    const data = next && copyInData(next)
    if (!data) return false
    this.#copyInEnded = data === 'ends'
    this.#input = next!
    this.#readOffset = 0
    return true
  }

  /**
   * Postgres asked for bytes the request does not have: it is inside
   * `COPY ... FROM STDIN` (everything else was checked to be whole frames).
   * Reading EOF there makes the backend exit, so answer with a CopyFail, and
   * with a Sync if an extended-protocol COPY then waits for one.
   */
  #starve(): void {
    this.#starved++
    if (this.#starved === 1) this.#input = COPY_FAIL
    else if (this.#starved === 2) this.#input = SYNC
    else return
    this.#readOffset = 0
  }

  /** Whether the session is inside a transaction block (BEGIN ... COMMIT). */
  get inTransaction(): boolean {
    return this.#mod._IsTransactionBlock() !== 0
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
  /**
   * Runs the main loop's error recovery. An ERROR raised inside it (out of
   * memory while it formats the report of an out-of-memory ERROR) jumps
   * back to the main loop's handler, as it does in a server's backend:
   * recovery runs again, and elog's recursion guard makes each pass's
   * report smaller (it resets ErrorContext). Past a few passes the engine
   * is left to die as before.
   */
  #recover(): void {
    const mod = this.#mod
    for (let pass = 1; ; pass++) {
      const sp = mod.stackSave()
      try {
        mod._PostgresMainLongJmp()
        return
      } catch (e) {
        mod.stackRestore(sp)
        if (!(isExitStatus(e) && e.status === EXIT_LONGJMP) || pass >= RECOVERY_PASSES) throw e
      }
    }
  }

  exec(message: Uint8Array, sink: ProtocolSink): void {
    this.#lastSnapshot = undefined
    this.#assertAlive()
    const mod = this.#mod
    this.#sink = sink
    this.#input = message
    this.#readOffset = 0
    this.#starved = 0
    this.#copyInEnded = false
    this.#tail.fill(0)
    const started = performance.now()
    this.#requestStarted = started
    this.requests++
    this.#inRequest = true
    if (this.timeLimitMs !== undefined) this.#control.cancelAt = started + this.timeLimitMs
    if (this.stopWhen !== undefined || this.whileBusy !== undefined) this.#control.pollAt = started + STOP_POLL_MS
    const topHandler = this.#guards.exceptionStack
    let failure: unknown
    try {
      while (this.#readOffset < this.#input.length || mod._pq_buffer_remaining_data() > 0) {
        const sp = mod.stackSave()
        try {
          mod._PostgresMainLoopOnce()
        } catch (e) {
          mod.stackRestore(sp)
          const thrown = isStackOverflow(e) ? this.#stackDepthError(e, topHandler) : e
          mod.stackRestore(sp)
          if (isExitStatus(thrown) && thrown.status === EXIT_LONGJMP) {
            // An ERROR: Postgres' own recovery (abort, emit E, skip to Sync).
            this.#recover()
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
      this.#sink = discard
      this.#input = new Uint8Array(0)
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
   * The JavaScript stack ran out inside the engine: deep recursion or
   * nesting that Postgres' own `max_stack_depth` check does not see, as it
   * measures the engine's stack in linear memory while most frames live on
   * the JavaScript stack. Outside a critical section the engine's state is
   * what an ERROR raised at that call would leave, so report Postgres' own
   * 54001 there and let the usual recovery run. Returns what the ERROR
   * threw, or `cause` if the engine cannot go on.
   */
  #stackDepthError(cause: unknown, topHandler: number): unknown {
    if (this.#guards.inCriticalSection) return cause
    try {
      this.#guards.raiseStackDepth(topHandler)
    } catch (raised) {
      return raised
    }
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
      if (!(isExitStatus(e) && e.status === EXIT_LONGJMP)) this.#die(e)
      this.#recover()
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
    this.#sink = sink
    this.#input = packet
    this.#readOffset = 0
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
      this.#sink = discard
      this.#input = new Uint8Array(0)
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
