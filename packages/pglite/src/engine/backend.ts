import type { EngineAssets } from './assets.js'
import { isExitStatus, type PostgresModule } from './emscripten.js'
import { EngineError } from '../errors.js'
import {
  installFastPreload,
  INITDB_EXE,
  PGDATA,
  POSTGRES_EXE,
  backendEnv,
  createMemory,
  installProcessHooks,
  instantiateWith,
  newModuleControl,
  preloadedPackage,
  type ModuleControl,
} from './module.js'
import { resetForRestore, restoreSnapshot, tableLength, takeSnapshot, type EngineSnapshot } from './snapshot.js'
import { materializeTree, readTree, type DataTree } from './pgdata-tree.js'
import { registerBlobDevice, type BlobDevice } from './blob-device.js'

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
   * side modules). Called after the backend notes its function-table size, so
   * side modules loaded here make it unsnapshotable.
   */
  readonly prepare?: (mod: PostgresModule) => Promise<void>
  /** Runs once the data directory is in place, before Postgres starts (e.g. to journal its changes). */
  readonly afterMount?: (mod: PostgresModule) => void
}

/** `callMain` returns this when the backend is up and waiting (wasm-abi.md §5.3). */
const EXIT_ALIVE = 99
/** The patched top-level longjmp after an ERROR exits with this (wasm-abi.md §6.4). */
const EXIT_LONGJMP = 100
const LOG_LINES_KEPT = 40
/** The memory a module starts with: the engine's own minimum (its wasm declares 2,048 pages). */
export const DEFAULT_MEMORY = 128 * 1024 * 1024

const COPY_FAIL = frontendFrame(0x66 /* f */, 'COPY FROM STDIN data must come in the same request as the COPY\0')
const SYNC = frontendFrame(0x53 /* S */, '')

function frontendFrame(type: number, body: string): Uint8Array {
  const bytes = new TextEncoder().encode(body)
  const frame = new Uint8Array(5 + bytes.length)
  frame[0] = type
  new DataView(frame.buffer).setInt32(1, 4 + bytes.length)
  frame.set(bytes, 5)
  return frame
}

type NodeFsSync = { fsyncSync(fd: number): void; fdatasyncSync(fd: number): void }
type NodeStream = { nfd?: number }

function nodeFs(): NodeFsSync {
  return (process as unknown as { getBuiltinModule(id: string): NodeFsSync }).getBuiltinModule('node:fs')
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
    const mod = await assets.postgresFactory({
      thisProgram: POSTGRES_EXE,
      arguments: [],
      noExitRuntime: true,
      wasmMemory: createMemory(memoryBytes),
      instantiateWasm: instantiateWith<PostgresModule>(assets.pgliteModule, control, overrides),
      getPreloadedPackage: preloadedPackage(assets),
      print: pushLog,
      printErr: pushLog,
      stdin: () => null,
      preRun: [
        (m) => {
          installFastPreload(m)
          Object.assign(m.ENV, env)
          blob = registerBlobDevice(m)
          if (mountPath !== undefined) {
            m.FS.mkdirTree(PGDATA)
            m.FS.mount(m.NODEFS, { root: mountPath }, PGDATA)
          }
          ;(m as unknown as { onRuntimeInitialized: () => void }).onRuntimeInitialized = () => {
            callbacks.push(...installProcessHooks(m))
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
  #closed = false
  #lastSnapshot: EngineSnapshot | undefined

  private constructor(blank: BlankModule, onLog: ((line: string) => void) | undefined, inMemory: boolean) {
    this.#blank = blank
    this.#inMemory = inMemory
    this.#pristineTable = tableLength(blank.control)
    this.#mod = blank.mod
    this.#control = blank.control
    this.#callbacks = blank.callbacks
    this.#log = blank.log
    this.#blob = blank.blob
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
      if (options.prepare) await options.prepare(mod)
      if (options.mount.kind === 'memory') materializeTree(mod, PGDATA, options.mount.tree)
      options.afterMount?.(mod)
      mod._pgl_setPGliteActive(1)
      let status: number
      try {
        status = mod.callMain(['--single', ...options.startArgs, '-D', PGDATA, options.database])
      } catch (cause) {
        throw new EngineError(`Postgres crashed while starting: ${String(cause)}`, {
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
    try {
      restoreSnapshot(blank.mod, blank.control, snapshot)
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
    this.#lastSnapshot ??= takeSnapshot(this.#mod, this.#control)
    return this.#lastSnapshot
  }

  /**
   * Ends an in-memory backend without a Postgres shutdown (nothing of it is
   * kept, so a checkpoint would be wasted) and returns its module, reset,
   * for the next restore: what makes create-query-close cycles cheap. Returns
   * `undefined` (and changes nothing) when the module cannot be reused: a
   * directory mount, a dead engine, or a side module loaded.
   */
  recycle(): BlankModule | undefined {
    if (this.#closed || this.#dead || !this.#inMemory || tableLength(this.#control) !== this.#pristineTable) return undefined
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
    this.#blob.setInput(undefined)
    this.#blob.takeOutput()
    this.#blank.setLogSink(undefined)
    return this.#blank
  }

  /** Whether a snapshot taken now could be restored (no side module loaded since start). */
  get isSnapshotable(): boolean {
    return !this.#dead && !this.#closed && tableLength(this.#control) === this.#pristineTable
  }


  /** @internal Read callback of the engine. */
  onRead(ptr: number, max: number): number {
    if (this.#readOffset >= this.#input.length) this.#starve()
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
    return t[0] === 0x5a && t[1] === 0 && t[2] === 0 && t[3] === 0 && t[4] === 5 ? t[5]! : 0
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

  /** Bytes of WASM linear memory currently allocated. */
  get memoryBytes(): number {
    return this.#mod.HEAPU8.byteLength
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
    this.#sink = sink
    this.#input = message
    this.#readOffset = 0
    this.#starved = 0
    this.#tail.fill(0)
    let failure: unknown
    try {
      while (this.#readOffset < this.#input.length || mod._pq_buffer_remaining_data() > 0) {
        const sp = mod.stackSave()
        try {
          mod._PostgresMainLoopOnce()
        } catch (e) {
          mod.stackRestore(sp)
          if (isExitStatus(e) && e.status === EXIT_LONGJMP) {
            // An ERROR: Postgres' own recovery (abort, emit E, skip to Sync).
            mod._PostgresMainLongJmp()
          } else {
            failure = e
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
    }
    if (failure !== undefined) this.#die(failure)
  }

  /** Processes a startup packet as a real server would (wasm-abi.md §6.5). */
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
    const error = new EngineError(
      exited
        ? `the engine exited with status ${cause.status}; the instance is closed: ${this.#log.slice(-2).join(' | ')}`
        : `the engine aborted (${String(cause)}); the instance is closed`,
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
   */
  shutdown(): void {
    if (this.#closed) return
    const mod = this.#mod
    if (!this.#dead) {
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
      // Throws ExitStatus(0) by design (wasm-abi.md §6.6).
    }
  }
}
