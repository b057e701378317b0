import type { EngineAssets } from './assets.js'
import type { FsNode, ModuleOptions, PostgresModule } from './emscripten.js'

/** Constants of the host conventions (wasm-abi.md §3); keep in sync with it. */
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
 * through `setitimer` (wasm-abi.md §6, fast-start.md §4).
 */
export interface ModuleControl {
  instance?: WebAssembly.Instance
  imports?: WebAssembly.Imports
  /** Armed timers: which -> absolute due time (performance.now() ms). */
  readonly armed: Map<number, number>
  /** Arms (or with 0 clears) an interval timer, as Postgres' setitimer does. */
  arm(which: number, timeoutMs: number): void
  /** Clears every timer; the module lives on (it is being reused). */
  disarmAll(): void
  /** Clears every timer and drops the instance: the module is done. */
  clearAll(): void
}

/**
 * `instantiateWasm` for a precompiled module. It also replaces the glue's
 * `setitimer` with one whose Node timers are unref'd: Postgres re-arms a 10 s
 * alarm forever, and the glue's own timer kept processes alive and pinned
 * instances that were never closed (fast-start.md §5.5).
 */
export function instantiateWith<M>(
  compiled: WebAssembly.Module,
  control: ModuleControl = newModuleControl(),
  overrides: Record<string, unknown> = {},
): ModuleOptions<M>['instantiateWasm'] {
  return (imports, done) => {
    const env = imports.env as Record<string, unknown>
    Object.assign(env, overrides)
    env._setitimer_js = (which: number, timeoutMs: number): number => {
      control.arm(which, timeoutMs)
      return 0
    }
    control.imports = imports
    void WebAssembly.instantiate(compiled, imports).then((instance) => {
      control.instance = instance
      done(instance, compiled)
    })
    return {}
  }
}

export function newModuleControl(): ModuleControl {
  const timers = new Map<number, ReturnType<typeof setTimeout>>()
  const armed = new Map<number, number>()
  const control: ModuleControl = {
    armed,
    arm(which, timeoutMs) {
      const previous = timers.get(which)
      if (previous !== undefined) {
        clearTimeout(previous)
        timers.delete(which)
        armed.delete(which)
      }
      if (!timeoutMs) return
      const timer = setTimeout(() => {
        timers.delete(which)
        armed.delete(which)
        const fire = control.instance?.exports._emscripten_timeout as ((w: number, now: number) => void) | undefined
        try {
          fire?.(which, performance.now())
        } catch {
          // An exit thrown from a timer callback has no caller to reach; the
          // next exec reports a dead engine.
        }
      }, timeoutMs)
      ;(timer as { unref?: () => void }).unref?.()
      timers.set(which, timer)
      armed.set(which, performance.now() + timeoutMs)
    },
    disarmAll() {
      for (const t of timers.values()) clearTimeout(t)
      timers.clear()
      armed.clear()
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

/** The environment a backend (or initdb's scratch backend) runs with (wasm-abi.md §4). */
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
 */
export function installFastPreload(m: PostgresModule): void {
  const fs = m.FS
  const dirs = new Map<string, FsNode>()
  const dirNode = (path: string): FsNode => {
    let node = dirs.get(path)
    if (!node) dirs.set(path, (node = fs.lookupPath(path).node))
    return node
  }
  const hooks = m as unknown as { FS_createDataFile: (path: string, name: null, data: Uint8Array) => void }
  hooks.FS_createDataFile = (path, _name, data) => {
    const slash = path.lastIndexOf('/')
    const parent = dirNode(slash === 0 ? '/' : path.slice(0, slash))
    const node = parent.node_ops.mknod(parent, path.slice(slash + 1), S_IFREG | PRELOADED_MODE, 0)
    node.contents = data
    node.usedBytes = data.byteLength
    // Every module shares these bytes: a write must copy first (pgdata-tree.ts).
    node.pgwasmShared = true
  }
}

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
 * (wasm-abi.md §5.4). Must run in `onRuntimeInitialized`, before `callMain`.
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
