import type { PostgresModule } from '../emscripten.js'
import { raiseError, type EngineAccess } from '../backend/raise-error.js'
import type { SideModuleTrust } from './side-module-guard.js'
import { readSideModuleLinks, type ImportedFunction, type SideModuleLinks } from './side-module-links.js'

/*
 * The published engine build left out functions that some of its own side
 * modules call (the encoding conversions' helpers, most of what `pgoutput`
 * and `libpqwalreceiver` need). The glue links such an import to a stub
 * that throws a TypeError when called, and that ends the engine, with an
 * in-memory database in it. And a module that takes the address of a
 * symbol nobody defines fails to load, but leaves an unresolved entry in
 * the glue's symbol table that fails every later load (PL/pgSQL's too).
 *
 * So before the glue instantiates a side module, its imports are read and
 * each function that nothing defines gets one of ours: an implementation
 * where we have one (encoding-conversions.ts), otherwise one that raises a
 * clear ERROR. A module that takes an address nothing defines is refused
 * before the glue sees it, as a missing file would be.
 */

/** `struct dso` fields the glue's `_dlopen_js` reads (emscripten's dynlink.c, wasm32). */
const DSO_FILE_DATA = 28
const DSO_FILE_DATA_SIZE = 32
const DSO_NAME = 36
/**
 * WASI's ENOENT: Postgres reports a failed load with SQLSTATE 58P01, as it
 * does when the glue's own loader fails.
 */
const ENOENT = 44
/** feature_not_supported */
const NOT_SUPPORTED = '0A000'

type Fn = (...args: number[]) => number

/** Whether the glue counts `value` as defined (its `isSymbolDefined`: present and not one of its lazy stubs). */
function isDefined(value: unknown): boolean {
  return Boolean(value) && !(value as { stub?: unknown }).stub
}

/** Collapses `.`, `..` and repeated slashes, as the glue does before its lookups. */
function normalize(path: string): string {
  const parts: string[] = []
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..') parts.pop()
    else parts.push(part)
  }
  return (path.startsWith('/') ? '/' : '') + parts.join('/')
}

/**
 * Whether the glue instantiated the module at `path` ahead of time. The
 * trust list accepts such a path without looking at any file, and it is the
 * only path it accepts when told there is no file.
 */
function isPreloaded(trust: SideModuleTrust, path: string): boolean {
  return trust.refusal(path, () => undefined, () => new Uint8Array(0)) === undefined
}

/** The bytes the glue will load for `handle`: those libc read into memory, or the file at `path`. */
function moduleBytes(mod: PostgresModule, handle: number, path: string): Uint8Array | undefined {
  const heap = new DataView(mod.HEAPU8.buffer)
  const data = heap.getUint32(handle + DSO_FILE_DATA, true)
  const size = heap.getUint32(handle + DSO_FILE_DATA_SIZE, true)
  if (data !== 0 && size !== 0) return mod.HEAPU8.subarray(data, data + size)
  if (!path.startsWith('/')) return undefined
  try {
    return mod.FS.readFile(path)
  } catch {
    return undefined
  }
}

/** An import nothing defines: calling it raises 0A000 naming it and its library. */
function missingFunction(engine: EngineAccess, name: string, library: string): ImportedFunction {
  return () =>
    raiseError(engine, {
      code: NOT_SUPPORTED,
      message: `function "${name}" needed by library "${library}" is not in this build of the engine`,
      routine: name,
    })
}

/**
 * The symbols `links` takes the address of that nothing defines and we do
 * not supply; weak ones may stay undefined (the loader makes them NULL).
 */
function unlinkable(links: SideModuleLinks, defined: (name: string) => boolean, supplied: ReadonlySet<string>): string[] {
  return [...links.functionAddresses, ...links.dataAddresses].filter((name) => !defined(name) && !supplied.has(name) && !links.weak.has(name))
}

/**
 * Wraps the glue's `_dlopen_js` import (see the file comment). `provided`
 * are our implementations of functions the engine lacks, by C name; they
 * are put in place only for a module that imports them while nothing
 * defines them, and only while it loads, so nothing that exists is ever
 * shadowed and a library loaded later that defines one still links.
 */
export function supplyMissingImports(
  env: Record<string, unknown>,
  engine: EngineAccess,
  trust: SideModuleTrust,
  provided: Readonly<Record<string, ImportedFunction>>,
): void {
  const load = env._dlopen_js as (handle: number) => number
  env._dlopen_js = (handle: number): number => {
    const mod = engine.module()
    const ex = engine.exports() as Record<string, Fn> | undefined
    if (!mod || !ex) return load(handle)
    const path = normalize(mod.UTF8ToString(handle + DSO_NAME))
    // A preloaded module was linked when it was preloaded (symbols other
    // preloaded modules define included): the loader only hands it out.
    if (isPreloaded(trust, path)) return load(handle)
    const bytes = moduleBytes(mod, handle, path)
    const links = bytes && readSideModuleLinks(bytes)
    // Libraries a module names as needed load first and may define what it
    // imports: a module with any is left to the loader as it was.
    if (!links || links.needed.length > 0) return load(handle)
    const library = path.slice(path.lastIndexOf('/') + 1)
    // What the loader finds: the engine's and earlier libraries' symbols, the
    // module's own exports, and the `invoke_*` trampolines it makes on demand.
    const defined = (name: string): boolean =>
      isDefined(env[name]) || links.exports.has(name) || links.exports.has(`__em_js__${name}`) || name.startsWith('invoke_')
    const missing = [...links.functions].filter(([name]) => !defined(name))
    const refused = unlinkable(links, defined, new Set(missing.map(([name]) => name)))
    if (refused.length > 0) return refuse(mod, ex, `it needs ${refused.join(', ')}, which this build of the engine does not have`)
    const added = new Map<string, ImportedFunction>()
    for (const [name, signature] of missing) {
      const fn = provided[name] ?? missingFunction(engine, name, library)
      // The loader puts an address-taken import in the function table with this signature.
      added.set(name, Object.assign(fn, { sig: signature }))
      env[name] = fn
    }
    try {
      return load(handle)
    } finally {
      for (const [name, fn] of added) if (env[name] === fn) delete env[name]
    }
  }
}

/** Fails the `dlopen` with `reason` in `dlerror()`: Postgres reports `could not load library "…": <reason>` as an ERROR. */
function refuse(mod: PostgresModule, ex: Record<string, Fn>, reason: string): number {
  const sp = mod.stackSave()
  try {
    // dlerror's text is a printf format.
    ex.__dl_seterr!(mod.stringToUTF8OnStack(reason.replaceAll('%', '%%')), 0)
    new DataView(mod.HEAPU8.buffer).setInt32(ex.__errno_location!(), ENOENT, true)
  } finally {
    mod.stackRestore(sp)
  }
  return 0
}
