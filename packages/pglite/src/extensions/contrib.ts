/**
 * PostgreSQL contrib modules from the engine package's bundles
 * (`<dist>/<bundle>.tar.gz`, docs/engine.md): their files are put into the
 * module's file system before Postgres starts, the side modules compiled and
 * instantiated ahead, so `CREATE EXTENSION` (or `LOAD`) finds them ready.
 */
import type { PostgresModule } from '../engine/emscripten.js'
import type { ModulePreload } from '../engine/starter.js'
import { PG_ROOT } from '../engine/module.js'
import { sideModuleTrust } from '../engine/side-module-guard.js'
import type { TreeEntry } from '../engine/pgdata-tree.js'
import { gunzip } from '../engine/gzip.js'
import { unpackTar } from '../engine/tar.js'
import { bundleBytes } from './contrib-bundles.js'
import type { ContribExtension } from './contrib-types.js'

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

/** The part of the glue's FS this needs beyond {@link PostgresModule}'s. */
interface PreloadFs {
  createPreloadedFile(
    parent: string,
    name: string,
    data: Uint8Array,
    canRead: boolean,
    canWrite: boolean,
    onload: () => void,
    onerror: (err: unknown) => void,
    dontCreateFile: boolean,
  ): void
}

/**
 * Writes the bundles' files under `/pglite` and compiles their side modules.
 * Runs after the module's runtime is up and before `callMain`, so libraries
 * in `shared_preload_libraries` are there when Postgres starts. Each side
 * module is instantiated here, which grows the function table: the backend
 * then reports itself not snapshotable, as it must (its memory refers to
 * modules a blank module would lack).
 */
export async function installContrib(mod: PostgresModule, contrib: readonly ContribExtension[]): Promise<void> {
  const trees = await Promise.all(contrib.map(readBundle))
  const lazy = new Set(trees.filter((_, i) => contrib[i]!.loadOnUse))
  const fs = mod.FS
  const sideModules: [dir: string, name: string, data: Uint8Array][] = []
  const written = new Set<string>()
  for (const tree of trees) {
    for (const entry of tree) {
      const path = `${PG_ROOT}/${entry.path}`
      if (written.has(path) || entry.path.split('/').some((part) => part.startsWith('.'))) continue
      written.add(path)
      if (!entry.data) {
        fs.mkdirTree(path)
        continue
      }
      const slash = path.lastIndexOf('/')
      const dir = path.slice(0, slash)
      fs.mkdirTree(dir)
      if (!path.endsWith('.so')) fs.writeFile(path, entry.data)
      // Loaded at first use: dlopen compiles the file, trusted for these bytes.
      else if (lazy.has(tree)) fs.writeFile(path, new Uint8Array(sideModuleTrust(mod).admit(entry.data)))
      else sideModules.push([dir, path.slice(slash + 1), entry.data])
    }
  }
  // One at a time. The glue instantiates a side module asynchronously and,
  // when it is done, resolves every symbol entry still unresolved, those of
  // modules whose instantiation is under way included; it fails on those,
  // and the module that finished is then compiled again at dlopen and linked
  // to the symbol entries of its first copy, whose data was never relocated
  // (pgcrypto's digest() failed with "Cipher cannot be initialized").
  for (const [dir, name, data] of sideModules) await preload(mod, dir, name, data)
}

function preload(mod: PostgresModule, dir: string, name: string, data: Uint8Array): Promise<void> {
  const fs = mod.FS as unknown as PreloadFs & PostgresModule['FS']
  const trust = sideModuleTrust(mod)
  // Trusted as admitted (the bundle's bytes, rewritten to poll), not as the
  // array the file system may go on to write into.
  const admitted = trust.admit(data)
  // The glue may keep the array (canOwn): hand it a copy, never the cached bundle.
  const bytes = new Uint8Array(admitted)
  return new Promise<void>((resolve) => {
    const loaded = (): void => {
      trust.trustPreloaded(`${dir}/${name}`)
      resolve()
    }
    fs.createPreloadedFile(dir, name, bytes, true, true, loaded, () => {
      // A module that failed to precompile is still loadable: dlopen then
      // compiles it synchronously (docs/engine.md).
      if (!fs.analyzePath(`${dir}/${name}`).exists) fs.writeFile(`${dir}/${name}`, bytes)
      resolve()
    }, false)
  })
}
