// A runtime-initialized engine module before Postgres runs in it: the
// module created with every hook the host installs, waiting for a start or
// a snapshot's restore (backend.ts).
import type { EngineAssets } from '../loading/assets.js'
import { deliverAlarmsWhileWorking } from './alarms.js'
import { capLogLines } from './log-lines.js'
import type { PostgresModule } from '../emscripten.js'
import {
  installFastPreload,
  INITDB_EXE,
  PGDATA,
  POSTGRES_EXE,
  createMemory,
  installProcessHooks,
  instantiateWith,
  newModuleControl,
  preloadedPackage,
  type ModuleControl,
} from './module.js'
import { watchMemoryFiles } from '../files/pgdata-tree.js'
import { registerBlobDevice, type BlobDevice } from '../files/blob-device.js'
import { adoptTrust, guardDlopen, moduleFileRefusal, SideModuleTrust } from '../hooks/side-module-guard.js'
import { supplyMissingImports } from '../hooks/missing-imports.js'
import { encodingConversions } from '../hooks/encoding-conversions.js'
import { guardSqlFileWrites } from '../hooks/file-write-guard.js'
import { ClientFunctions } from '../hooks/client-functions.js'
import { catchStackOverflows, SessionGuards } from '../hooks/session-guards.js'
import { recordDynamicLinks } from '../start/dynamic-links.js'
import { nodeBuiltin } from '../node-builtin.js'

/** Where the engine's wire callbacks go: the backend running in the module. */
export interface WireTarget {
  onRead(ptr: number, max: number): number
  onWrite(ptr: number, length: number): number
}

const LOG_LINES_KEPT = 40

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
    readonly bind: (target: WireTarget) => void,
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
    let target: WireTarget | undefined
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
      (next) => {
        target = next
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
