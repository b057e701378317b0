import type { EngineAssets } from '../loading/assets.js'
import type { LazyFiles } from '../loading/lazy-files.js'
import { writeMemoryImage } from '../loading/memory-image.js'
import type { FsNode, ModuleOptions, PostgresModule } from '../emscripten.js'
import { MemoryBudget } from './memory-budget.js'
import { sideModuleTrust } from '../hooks/side-module-guard.js'
import type { DynamicLinks } from '../start/dynamic-links.js'

/** Constants of the host conventions (docs/engine.md); keep in sync with it. */
export const PG_ROOT = '/pglite'
export const PGDATA = '/pglite/data'
export const POSTGRES_EXE = '/pglite/bin/postgres'
export const INITDB_EXE = '/pglite/bin/initdb'

const WASM_PAGE_BYTES = 65536
/** 2 GiB: the 32-bit build cannot address more. */
const MAX_PAGES = 32768

/**
 * Per-module handles our `instantiateWasm` keeps: the instance (for its table
 * and exports), the import object, and the interval timers Postgres arms
 * through `setitimer` (docs/engine.md).
 */
export interface ModuleControl {
  instance?: WebAssembly.Instance
  imports?: WebAssembly.Imports
  /** Armed timers: which -> absolute due time (performance.now() ms). */
  readonly armed: Map<number, number>
  /** The earliest due time in `armed` (Infinity: none). */
  nextDue: number
  /**
   * Whether an alarm that is due may be delivered now, in the middle of a
   * request (see alarms.ts); the backend running on the module decides.
   */
  mayDeliverAlarm: () => boolean
  /**
   * When the running request is to be canceled (performance.now() ms;
   * Infinity: never), as a CancelRequest would: see alarms.ts.
   */
  cancelAt: number
  /** Marks the running statement canceled (Postgres' `QueryCancelPending`). */
  cancelStatement: () => void
  /**
   * When the host is next asked whether the running request is to stop
   * (performance.now() ms; Infinity: never): see alarms.ts and {@link poll}.
   */
  pollAt: number
  /** Asks the host whether the running request is to stop; called at `pollAt`, at a call out of the engine. */
  poll: (now: number) => void
  /**
   * WaitLatch is about to wait with no timeout (`event`: its wait event,
   * `latch`: the latch's address), after due alarms and cancels were
   * delivered: see untimed-waits.ts.
   */
  untimedWait: (event: number, latch: number) => void
  /** Arms (or with 0 clears) an interval timer, as Postgres' setitimer does. */
  arm(which: number, timeoutMs: number): void
  /** Clears every timer; the module lives on (it is being reused). */
  disarmAll(): void
  /** Clears every timer and drops the instance: the module is done. */
  clearAll(): void
  /** The side modules Postgres linked at run time (dynamic-links.ts). */
  readonly links: DynamicLinks
  /** The memory ceiling the heap and the in-memory files share (memory-budget.ts). */
  readonly budget: MemoryBudget
}

/**
 * `instantiateWasm` for a precompiled module. It also replaces the glue's
 * `setitimer` with one that only records the alarm (see `newModuleControl`):
 * the glue's own timer kept processes alive, pinned instances that were
 * never closed, and delivered alarms that end the backend.
 */
export function instantiateWith<M>(
  compiled: WebAssembly.Module,
  control: ModuleControl = newModuleControl(),
  overrides: Record<string, unknown> = {},
  wrapImports?: (env: Record<string, unknown>, imports: WebAssembly.Imports) => void,
): ModuleOptions<M>['instantiateWasm'] {
  return (imports, done) => {
    const env = imports.env as Record<string, unknown>
    Object.assign(env, overrides)
    wrapImports?.(env, imports)
    env._setitimer_js = (which: number, timeoutMs: number): number => {
      control.arm(which, timeoutMs)
      return 0
    }
    // Refused, malloc returns NULL: 53200. The glue may grow past a request
    // it grants by up to 20% (at most 96 MiB): the budget's margin.
    const resize = env.emscripten_resize_heap as ((requested: number) => number) | undefined
    if (resize) env.emscripten_resize_heap = (requested: number): number => (control.budget.heapFits(requested >>> 0) ? resize(requested) : 0)
    control.imports = imports
    void WebAssembly.instantiate(compiled, imports).then((instance) => {
      writeMemoryImage(compiled, env.memory as WebAssembly.Memory | undefined)
      control.instance = instance
      done(instance, compiled)
    })
    return {}
  }
}

export function newModuleControl(): ModuleControl {
  const armed = new Map<number, number>()
  const control: ModuleControl = {
    armed,
    links: { opens: [], syms: [], unreplayable: false, replaying: false, known: new Map() },
    nextDue: Infinity,
    mayDeliverAlarm: () => false,
    cancelAt: Infinity,
    cancelStatement: () => {},
    pollAt: Infinity,
    poll: () => {},
    untimedWait: () => {},
    budget: new MemoryBudget(() => ((control.imports?.env as { memory?: WebAssembly.Memory } | undefined)?.memory?.buffer.byteLength ?? 0), MAX_PAGES * WASM_PAGE_BYTES),
    arm(which, timeoutMs) {
      // Recorded, never delivered by a timer: between two requests every
      // alarm Postgres arms is one that ends the session (idle-in-transaction,
      // idle-session and transaction timeouts) or a statistics flush, and
      // ending the session would end the engine every caller shares; the host
      // enforces those timeouts itself (session-guards.ts, the socket server).
      // Inside a request, a due statement-level alarm is delivered where the
      // engine calls out to JavaScript (alarms.ts).
      if (timeoutMs) armed.set(which, performance.now() + timeoutMs)
      else armed.delete(which)
      control.nextDue = armed.size === 0 ? Infinity : Math.min(...armed.values())
    },
    disarmAll() {
      armed.clear()
      control.nextDue = Infinity
    },
    clearAll() {
      control.disarmAll()
      control.instance = undefined
    },
  }
  return control
}

export function createMemory(initialBytes: number): WebAssembly.Memory {
  const initial = Math.min(MAX_PAGES, Math.max(256, Math.ceil(initialBytes / WASM_PAGE_BYTES)))
  return new WebAssembly.Memory({ initial, maximum: MAX_PAGES })
}

/** The environment a backend (or initdb's scratch backend) runs with (docs/engine.md). */
export function backendEnv(username: string, database: string): Record<string, string> {
  return {
    HOME: '/home/postgres',
    USER: 'postgres',
    LOGNAME: 'postgres',
    PGDATA,
    PGUSER: username,
    PGDATABASE: database,
    LANG: 'en_US.UTF-8',
    LC_COLLATE: 'en_US.UTF-8',
    LC_CTYPE: 'en_US.UTF-8',
    TZ: 'UTC',
    PGTZ: 'UTC',
    PGCLIENTENCODING: 'UTF8',
    ICU_DATA: `${PG_ROOT}/icu`,
  }
}

const S_IFREG = 0o100000
/** What the glue's `FS_createDataFile(path, null, data, true, true, true)` gives a preloaded file. */
const PRELOADED_MODE = 0o777

/**
 * Replaces the glue's way of creating the thousands of `pglite.data` files
 * (a path lookup, open, write and chmod each) with one MEMFS node each,
 * sharing the package's bytes: the same files at about a third of the cost,
 * which is most of what a pooled module costs to make. Run in `preRun`,
 * before the glue's package loader (also a `preRun`) does its work.
 * A file `lazy` does not have yet gets its bytes when it is first opened.
 */
export function installFastPreload(m: PostgresModule, lazy?: LazyFiles): void {
  const fs = m.FS
  const dirs = new Map<string, FsNode>()
  const dirNode = (path: string): FsNode => {
    let node = dirs.get(path)
    if (!node) dirs.set(path, (node = fs.lookupPath(path).node))
    return node
  }
  const hooks = m as unknown as { FS_createDataFile: (path: string, name: null, data: Uint8Array) => void }
  let index = 0
  hooks.FS_createDataFile = (path, _name, data) => {
    const slash = path.lastIndexOf('/')
    const parent = dirNode(slash === 0 ? '/' : path.slice(0, slash))
    const node = parent.node_ops.mknod(parent, path.slice(slash + 1), S_IFREG | PRELOADED_MODE, 0)
    // Every module shares these bytes: a write must copy first (pgdata-tree.ts).
    node.pgwasmShared = true
    const fill = (): void => {
      const contents = path.endsWith('.so') ? sideModuleTrust(m).admit(data) : data
      node.contents = contents
      node.usedBytes = contents.byteLength
    }
    const file = index++
    if (!lazy || lazy.has(file)) return fill()
    if (lazy.sizeOf(file) !== data.byteLength) throw new Error(`pglite.data: ${path} is ${data.byteLength} bytes, the build's layout says ${lazy.sizeOf(file)}`)
    node.contents = null
    node.usedBytes = data.byteLength
    const lazyNode = node as FsNode & { stream_ops: object }
    const ops = lazyNode.stream_ops
    lazyNode.stream_ops = {
      ...ops,
      open: (stream: { fd: number; stream_ops: object }) => {
        openLazy(m, lazy, file, path, stream, fill)
        // There now: later opens are plain ones.
        lazyNode.stream_ops = stream.stream_ops = ops
      },
    }
  }
}

/**
 * Gives a lazy file its bytes as Postgres opens it (reading never needs
 * more: stat reads the size the node already has). A pack that cannot be
 * had fails the open with EIO, an ERROR naming the file, and the reason in
 * the engine's log; the engine goes on.
 */
function openLazy(m: PostgresModule, lazy: LazyFiles, file: number, path: string, stream: { fd: number }, fill: () => void): void {
  try {
    lazy.loadSync(file)
    fill()
  } catch (err) {
    ;(m as unknown as { printErr?: (line: string) => void }).printErr?.(`pgwasm: ${path}: ${err instanceof Error ? err.message : String(err)}`)
    const fs = m.FS as unknown as { closeStream(fd: number): void; ErrnoError: new (errno: number) => Error }
    fs.closeStream(stream.fd)
    throw new fs.ErrnoError(EIO)
  }
}

/** Emscripten's errno for an I/O error. */
const EIO = 29

/** `getPreloadedPackage` handing every instance the same `pglite.data` buffer. */
export function preloadedPackage(assets: EngineAssets): (name: string, size: number) => ArrayBuffer {
  return (_name, size) => {
    if (size !== assets.pgliteData.byteLength) {
      throw new Error(`pglite.data is ${assets.pgliteData.byteLength} bytes, the engine expects ${size}`)
    }
    return assets.pgliteData
  }
}

/**
 * Answers Postgres' process emulation: `system()` fails (there are no
 * processes), `popen('locale -a')` reads the shipped locale list
 * (docs/engine.md). Must run in `onRuntimeInitialized`, before `callMain`.
 */
export function installProcessHooks(mod: PostgresModule): number[] {
  let open = 0
  const system = mod.addFunction(() => 1, 'pi')
  const popen = mod.addFunction((cmdPtr: number) => {
    const command = mod.UTF8ToString(cmdPtr)
    if (!command.startsWith('locale -a')) return 0
    open = mod._fopen(mod.stringToUTF8OnStack(`${PG_ROOT}/locale-a`), mod.stringToUTF8OnStack('r'))
    return open
  }, 'ppp')
  const pclose = mod.addFunction((stream: number) => {
    if (stream !== 0 && stream === open) {
      open = 0
      return mod._fclose(stream)
    }
    return -1
  }, 'pi')
  mod._pgl_set_system_fn(system)
  mod._pgl_set_popen_fn(popen)
  mod._pgl_set_pclose_fn(pclose)
  return [system, popen, pclose]
}

/** The trees `pglite.data` ships; Postgres only ever reads them. */
const SHIPPED_TREES = [`${PG_ROOT}/bin`, `${PG_ROOT}/lib`, `${PG_ROOT}/share`, `${PG_ROOT}/icu`, '/home']

/**
 * Makes the shipped files and their folders read-only. Emscripten's file
 * system checks mode bits once the runtime is up, so SQL that writes files
 * (`lo_export`, `COPY ... TO`) can no longer replace an extension's control
 * file or SQL script, or leave files for the next database a recycled
 * module serves. The host writes there itself (contrib bundles) with
 * {@link asHost}.
 */
export function lockShippedTrees(mod: PostgresModule): void {
  const fs = mod.FS
  const lock = (node: FsNode): void => {
    if (fs.isDir(node.mode)) {
      node.mode = (node.mode & ~0o7777) | 0o555
      for (const child of Object.values(node.contents as Record<string, FsNode>)) lock(child)
    } else if (fs.isFile(node.mode)) {
      node.mode = (node.mode & ~0o7777) | (node.mode & 0o111 ? 0o555 : 0o444)
    }
  }
  for (const root of SHIPPED_TREES) {
    const found = fs.analyzePath(root)
    if (found.exists && found.object) lock(found.object)
  }
}

/** Runs `job` with the file system's permission checks off: the host's own writes. */
export function asHost<T>(mod: PostgresModule, job: () => T): T {
  const fs = mod.FS as unknown as { ignorePermissions: boolean }
  const before = fs.ignorePermissions
  fs.ignorePermissions = true
  try {
    return job()
  } finally {
    fs.ignorePermissions = before
  }
}

