/**
 * PostgreSQL contrib modules from the engine package's bundles
 * (`<dist>/<bundle>.tar.gz`, docs/engine.md): their files are put into the
 * module's file system before Postgres starts, the side modules compiled and
 * instantiated ahead, so `CREATE EXTENSION` (or `LOAD`) finds them ready.
 */
import type { PostgresModule } from '../engine/emscripten.js'
import type { ModulePreload } from '../engine/start/starter.js'
import { PG_ROOT } from '../engine/backend/module.js'
import { sideModuleTrust } from '../engine/hooks/side-module-guard.js'
import { importedSymbols, withNeededExports } from '../engine/hooks/side-module-exports.js'
import { pollingSideModule } from '../engine/loading/interrupt-polls.js'
import { inNode } from '../engine/node-builtin.js'
import type { TreeEntry } from '../engine/files/pgdata-tree.js'
import { gunzip } from '../engine/files/gzip.js'
import { unpackTar } from '../engine/files/tar.js'
import { bundleBytes } from './contrib-bundles.js'
import type { ContribExtension } from './contrib-types.js'
import { readInstalled, saveInstalled, type InstallEntry, type PreparedInstall } from './installed-bundles.js'

export type { ContribExtension }

/** Whether an `extensions` entry is a contrib bundle (it has `bundle` and no `setup`). */
export function isContribExtension(value: unknown): value is ContribExtension {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { bundle?: unknown }).bundle === 'string' &&
    typeof (value as { setup?: unknown }).setup !== 'function'
  )
}

/** The contrib entries of an `extensions` map, in key order. */
export function contribExtensions(extensions: Readonly<Record<string, unknown>> | undefined): ContribExtension[] {
  return extensions ? Object.values(extensions).filter(isContribExtension) : []
}

/**
 * Adds the contrib modules' `shared_preload_libraries` to the start
 * arguments, merged with one the caller set (Postgres keeps only the last
 * `-c` of a name, so appending a second would drop the caller's).
 */
export function withPreloadLibraries(args: string[], contrib: readonly ContribExtension[]): string[] {
  const wanted = contrib.flatMap((c) => c.sharedPreloadLibraries ?? [])
  if (wanted.length === 0) return args
  const out = [...args]
  const at = out.findLastIndex((arg, i) => i > 0 && out[i - 1] === '-c' && arg.startsWith('shared_preload_libraries='))
  const current = at < 0 ? [] : out[at]!.slice('shared_preload_libraries='.length).split(',').map((s) => s.trim()).filter(Boolean)
  const merged = [...new Set([...current, ...wanted])].join(',')
  if (at < 0) out.push('-c', `shared_preload_libraries=${merged}`)
  else out[at] = `shared_preload_libraries=${merged}`
  return out
}

/**
 * `contrib` as the engine's start paths preload it: installed by
 * {@link installContrib}, under a key that tells lists apart by what they
 * install, so that a module or snapshot made for one list serves the next
 * instance with the same list.
 */
export function contribPreload(contrib: readonly ContribExtension[]): ModulePreload {
  return {
    key: JSON.stringify(contrib.map((c) => [c.name, c.bundle, c.bundlePath === undefined ? null : String(c.bundlePath), c.loadOnUse === true])),
    install: (mod) => installContrib(mod, contrib),
  }
}

/** Unpacked bundles by name or file, once per process: every instance reads the same files. */
const bundles = new Map<string, Promise<TreeEntry[]>>()

async function readBundle(extension: ContribExtension): Promise<TreeEntry[]> {
  const key = extension.bundlePath === undefined ? extension.bundle : String(extension.bundlePath)
  let read = bundles.get(key)
  if (!read) {
    // Sorted: a side module preloaded before one that links against it (docs/engine.md).
    read = bundleBytes(extension).then(async (packed) => unpackTar(await gunzip(packed)).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)))
    bundles.set(key, read)
    read.catch(() => bundles.delete(key))
  }
  return read
}

/**
 * Prepares the install of `contrib` ahead of the module it goes into: reads
 * it from the disk cache at `cacheDir` (Node; the templates' cache) while
 * the engine loads, and compiles its side modules once it has.
 */
export function warmContrib(contrib: readonly ContribExtension[], cacheDir: string | false | undefined, engineLoaded: Promise<unknown>): void {
  const key = installKey(contrib)
  if (cacheDir === false || !inNode || fromDisk.has(key)) return
  const read = readInstalled(contrib, cacheDir)
  // Compiled once the engine is: V8 compiles on the same background threads,
  // and the engine's compile is what the first database waits for.
  void Promise.all([read, engineLoaded.catch(() => undefined)]).then(([install]) => {
    for (const e of install?.entries ?? []) if (e.kind === 'module' && !e.lazy) compiledSideModule(e.data).catch(() => {})
  })
  fromDisk.set(key, { cacheDir, read })
}

/** Installs read from the disk cache, and where they are kept, by install (see {@link warmContrib}). */
const fromDisk = new Map<string, { readonly cacheDir: string | undefined; readonly read: Promise<PreparedInstall | undefined> }>()

/** Installs ready for a module, once per process, by install and poll slot. */
const installs = new Map<string, Promise<PreparedInstall>>()

function preparedInstall(contrib: readonly ContribExtension[], pollSlot: number | undefined): Promise<PreparedInstall> {
  const key = `${installKey(contrib)}\0${pollSlot ?? ''}`
  let install = installs.get(key)
  if (!install) {
    install = (async () => {
      const disk = fromDisk.get(installKey(contrib))
      const read = await disk?.read
      if (read && read.pollSlot === pollSlot) return read
      const made = await fromBundles(contrib, pollSlot)
      if (disk) void saveInstalled(contrib, made, disk.cacheDir)
      return made
    })()
    installs.set(key, install)
    install.catch(() => installs.delete(key))
  }
  return install
}

/**
 * The bundles' files, unpacked, and their side modules rewritten to poll
 * the host at `pollSlot` (engine/loading/interrupt-polls.ts), with the exports
 * nothing looks up dropped (engine/hooks/side-module-exports.ts): each keeps
 * what any module of the install imports.
 */
async function fromBundles(contrib: readonly ContribExtension[], pollSlot: number | undefined): Promise<PreparedInstall> {
  const trees = await Promise.all(contrib.map(readBundle))
  const entries: InstallEntry[] = []
  const written = new Set<string>()
  for (const [i, tree] of trees.entries()) {
    for (const entry of tree) {
      if (written.has(entry.path) || entry.path.split('/').some((part) => part.startsWith('.'))) continue
      written.add(entry.path)
      if (!entry.data) entries.push({ kind: 'dir', path: entry.path })
      else if (!entry.path.endsWith('.so')) entries.push({ kind: 'file', path: entry.path, data: entry.data })
      else {
        const data = pollSlot === undefined ? entry.data : pollingSideModule(entry.data, pollSlot)
        entries.push({ kind: 'module', path: entry.path, data, lazy: contrib[i]!.loadOnUse === true })
      }
    }
  }
  const modules = entries.filter((e) => e.kind === 'module')
  const imports = modules.map((m) => importedSymbols(m.data))
  // A module the reader does not understand might import anything: every export stays.
  if (imports.some((names) => names === undefined)) return { pollSlot, entries }
  const keep = new Set(imports.flat() as string[])
  return { pollSlot, entries: entries.map((e) => (e.kind === 'module' ? { ...e, data: withNeededExports(e.data, keep) } : e)) }
}

/**
 * Writes the bundles' files under `/pglite` and instantiates their side
 * modules. Runs after the module's runtime is up and before `callMain`, so
 * libraries in `shared_preload_libraries` are there when Postgres starts.
 * Each side module is instantiated here, which grows the function table: a
 * snapshot of the backend then needs a module preloaded the same way
 * (engine/start/dynamic-links.ts).
 */
export async function installContrib(mod: PostgresModule, contrib: readonly ContribExtension[]): Promise<void> {
  const fs = mod.FS
  const trust = sideModuleTrust(mod)
  const { entries } = await preparedInstall(contrib, trust.pollSlot)
  const preloads: { dir: string; name: string; data: Uint8Array }[] = []
  for (const entry of entries) {
    const path = `${PG_ROOT}/${entry.path}`
    if (entry.kind === 'dir') {
      fs.mkdirTree(path)
      continue
    }
    const slash = path.lastIndexOf('/')
    const dir = path.slice(0, slash)
    fs.mkdirTree(dir)
    // Postgres reads these files (scripts, control files; a library is stat'd before it is loaded), never writes them.
    sharedFile(mod, dir, path.slice(slash + 1), entry.data)
    if (entry.kind === 'module') {
      // Trusted as installed: the bundle's bytes rewritten to poll, their unused exports dropped.
      trust.trustBytes(entry.data)
      // Loaded at first use (dlopen compiles the file, trusted for these bytes), else now.
      if (!entry.lazy) preloads.push({ dir, name: path.slice(slash + 1), data: entry.data })
    }
  }
  // One at a time. The glue instantiates a side module asynchronously and,
  // when it is done, resolves every symbol entry still unresolved, those of
  // modules whose instantiation is under way included; it fails on those,
  // and the module that finished is then compiled again at dlopen and linked
  // to the symbol entries of its first copy, whose data was never relocated
  // (pgcrypto's digest() failed with "Cipher cannot be initialized").
  for (const m of preloads) await preload(mod, m.dir, m.name, m.data)
}

const S_IFREG = 0o100000

/**
 * A file holding `data` itself, not a copy: every module of the process
 * shares the install's bytes (pgcrypto's 3 MB were copied for each), as
 * the files of `pglite.data` are shared. The install prefix is made
 * read-only before Postgres starts (`lockShippedTrees`), and a write would
 * copy first (the node is flagged shared, pgdata-tree.ts).
 */
function sharedFile(mod: PostgresModule, dir: string, name: string, data: Uint8Array): void {
  const parent = mod.FS.lookupPath(dir).node
  const node = parent.node_ops.mknod(parent, name, S_IFREG | 0o666, 0)
  node.contents = data
  node.usedBytes = data.byteLength
  node.pgwasmShared = true
}

/** Names an install's bundle list (each bundle is read once per process, by name or file). */
function installKey(contrib: readonly ContribExtension[]): string {
  return JSON.stringify(contrib.map((c) => [c.bundlePath === undefined ? c.bundle : String(c.bundlePath), c.loadOnUse === true]))
}

/**
 * The glue's preload entry point (exported on the module object): runs the
 * file through the wasm preload plugin, which instantiates a side module
 * and keeps its exports for `dlopen`. Given a compiled `WebAssembly.Module`
 * the plugin instantiates that (the glue's loader accepts one) instead of
 * compiling bytes.
 */
interface PreloadHook {
  FS_preloadFile(parent: string, name: string, data: WebAssembly.Module, canRead: boolean, canWrite: boolean, dontCreateFile: boolean): Promise<void>
}

/**
 * Compiled side modules, by their installed bytes (one array per bundle
 * file, install and process): a module with contrib preloaded is made for
 * every restore of a database with extensions that finds none to reuse (a
 * process's first, a clone while its source stays open), and each used to
 * compile pgcrypto's 3 MB again.
 */
const compiled = new WeakMap<Uint8Array, Promise<WebAssembly.Module>>()

function compiledSideModule(bytes: Uint8Array): Promise<WebAssembly.Module> {
  let module = compiled.get(bytes)
  if (!module) {
    module = WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>)
    compiled.set(bytes, module)
    // A failure is not kept: the next preload compiles again (and reports it).
    module.catch(() => compiled.delete(bytes))
  }
  return module
}

async function preload(mod: PostgresModule, dir: string, name: string, bytes: Uint8Array): Promise<void> {
  const path = `${dir}/${name}`
  try {
    await (mod as unknown as PreloadHook).FS_preloadFile(dir, name, await compiledSideModule(bytes), true, true, true)
    sideModuleTrust(mod).trustPreloaded(path)
  } catch {
    // A module that failed to compile or instantiate is still loadable:
    // dlopen then compiles the file's bytes synchronously (docs/engine.md).
  }
}
