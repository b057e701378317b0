import type { PostgresModule } from '../emscripten.js'
import { pollingSideModule } from '../loading/interrupt-polls.js'

/**
 * Which side modules (`.so` files) the engine may load. Emscripten's loader
 * evaluates the JavaScript embedded in a side module (its `__em_js__` and
 * `em_asm` strings) while instantiating it, before Postgres looks at the
 * module at all. SQL can write files (`lo_export`, `COPY ... TO`), so a
 * module is trusted for what it is, never for where it lies: its bytes
 * must equal those of a module from `pglite.data` or from an extension
 * bundle the host passed in, or its path must be one the host preloaded
 * (the loader then uses the preloaded instance and never reads the file).
 */
export class SideModuleTrust {
  /**
   * @param pollSlot the function-table slot of the engine's interrupt poll
   *   (interrupt-polls.ts): side modules the host admits are rewritten to
   *   call it, so that their loops can be stopped too.
   */
  constructor(readonly pollSlot?: number) {}

  /** Trusted module bytes, by length: a candidate is compared byte for byte. */
  readonly #bySize = new Map<number, Uint8Array[]>()
  /** Paths whose module the glue instantiated at preload time. */
  readonly #preloaded = new Set<string>()

  /** Trusts a module with exactly these bytes, wherever it is later found. */
  trustBytes(bytes: Uint8Array): void {
    const same = this.#bySize.get(bytes.byteLength)
    if (!same) this.#bySize.set(bytes.byteLength, [bytes])
    else if (!same.some((b) => equalBytes(b, bytes))) same.push(bytes)
  }

  /**
   * The bytes to install for a side module the host ships or was given:
   * with its interrupt checks polling the engine's host, and trusted.
   */
  admit(bytes: Uint8Array): Uint8Array {
    const admitted = this.pollSlot === undefined ? bytes : pollingSideModule(bytes, this.pollSlot)
    this.trustBytes(admitted)
    return admitted
  }

  /** Trusts the preloaded instance the glue keeps under `path`. */
  trustPreloaded(path: string): void {
    this.#preloaded.add(path)
  }

  /**
   * Why the module at `path` may not be loaded, or `undefined` when it may.
   * `size` and `read` look the file up in the engine's file system (never
   * the host's: the glue would fall back to the host file system, or to a
   * URL in a browser, for a path its own file system lacks).
   */
  refusal(path: string, size: () => number | undefined, read: () => Uint8Array): string | undefined {
    if (this.#preloaded.has(path)) return undefined
    const refused = `pgwasm loads only the extension modules it ships or that were passed in the "extensions" option, and "${path}" is not one of them`
    if (!path.startsWith('/')) return refused
    const length = size()
    const candidates = length === undefined ? undefined : this.#bySize.get(length)
    if (!candidates) return refused
    const bytes = read()
    return candidates.some((b) => equalBytes(b, bytes)) ? undefined : refused
  }
}

const trusts = new WeakMap<object, SideModuleTrust>()

/** The trust list of one engine module, made on first use. */
export function sideModuleTrust(mod: object): SideModuleTrust {
  let trust = trusts.get(mod)
  if (!trust) trusts.set(mod, (trust = new SideModuleTrust()))
  return trust
}

/** Makes `trust` the list of `mod`: its loader guard was set up before the module object existed. */
export function adoptTrust(mod: object, trust: SideModuleTrust): void {
  trusts.set(mod, trust)
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  // The same array: every module of a process installs the bytes cached once.
  if (a === b) return true
  if (a.byteLength !== b.byteLength) return false
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false
  return true
}

/** `struct dso` fields the glue's `_dlopen_js` reads (emscripten's dynlink.c, wasm32). */
const DSO_FILE_DATA = 28
const DSO_FILE_DATA_SIZE = 32
const DSO_NAME = 36
/** WASI's EACCES, which Postgres maps to SQLSTATE 42501 (insufficient privilege). */
const EACCES = 2

/** Collapses `.`, `..` and repeated slashes, as the glue does before its lookups. */
function normalize(path: string): string {
  const absolute = path.startsWith('/')
  const parts: string[] = []
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..') parts.pop()
    else parts.push(part)
  }
  return (absolute ? '/' : '') + parts.join('/')
}

/**
 * Wraps the glue's `_dlopen_js` import so that a refused module fails like
 * a missing one: `dlopen` returns NULL with our reason in `dlerror()`, and
 * Postgres reports `could not load library "…": <reason>` as an ERROR.
 * Nothing of a refused file reaches the loader.
 */
export function guardDlopen(
  env: Record<string, unknown>,
  trust: SideModuleTrust,
  module: () => PostgresModule | undefined,
  exports: () => WebAssembly.Exports | undefined,
): void {
  const load = env._dlopen_js as (handle: number) => number
  env._dlopen_js = (handle: number): number => {
    const mod = module()
    const ex = exports()
    if (!mod || !ex) return 0
    const heap = new DataView(mod.HEAPU8.buffer)
    const name = normalize(mod.UTF8ToString(handle + DSO_NAME))
    // libc's dlopen may have read the file into memory already; the glue
    // then loads those bytes, so they are what must be trusted.
    const data = heap.getUint32(handle + DSO_FILE_DATA, true)
    const dataSize = heap.getUint32(handle + DSO_FILE_DATA_SIZE, true)
    const refusal =
      data !== 0 && dataSize !== 0
        ? trust.refusal(
            name,
            () => dataSize,
            () => mod.HEAPU8.slice(data, data + dataSize),
          )
        : moduleFileRefusal(mod, trust, name)
    if (refusal === undefined) return load(handle)
    const sp = mod.stackSave()
    try {
      ;(ex.__dl_seterr as (msg: number, len: number) => void)(mod.stringToUTF8OnStack(refusal), 0)
      heap.setInt32((ex.__errno_location as () => number)(), EACCES, true)
    } finally {
      mod.stackRestore(sp)
    }
    return 0
  }
}

/** Why the module file at `path` may not be loaded into `mod`, or undefined when it may. */
export function moduleFileRefusal(mod: PostgresModule, trust: SideModuleTrust, path: string): string | undefined {
  const name = normalize(path)
  // A shipped module the page has not fetched yet gets its bytes (and with
  // them its trusted size) on open (lazy-files.ts); for any other regular
  // file an open and close changes nothing (a device's open might).
  try {
    if (mod.FS.isFile(mod.FS.stat(name).mode)) mod.FS.close(mod.FS.open(name, 'r'))
  } catch {
    // Missing or unreadable: refused below.
  }
  return trust.refusal(
    name,
    () => fileSize(mod, name),
    () => mod.FS.readFile(name),
  )
}

function fileSize(mod: PostgresModule, path: string): number | undefined {
  try {
    const st = mod.FS.stat(path)
    return mod.FS.isFile(st.mode) ? st.size : undefined
  } catch {
    return undefined
  }
}
