// Apart from the installer, so that the installer does not import the option types (and through them the PGlite class).
import type { PGliteExtension } from '../options.js'
import { isContribExtension } from './contrib.js'
import type { ContribExtension } from './contrib-types.js'

/**
 * `extension`, made available to `CREATE EXTENSION` without being compiled
 * ahead (what a server offering every bundle wants): its files are installed
 * at start, its side modules compiled at first use. It is not put in
 * `shared_preload_libraries` (as on a server where the library is installed
 * but not preloaded).
 */
export function onUse(extension: ContribExtension): ContribExtension
/** An add-on (pgvector's `vector`) whose bundle is installed at start and compiled at first use. */
export function onUse(extension: PGliteExtension): PGliteExtension
export function onUse(extension: ContribExtension | PGliteExtension): ContribExtension | PGliteExtension {
  if (!isContribExtension(extension)) {
    // Its setup may be a method: the copy keeps the prototype.
    return Object.freeze(Object.assign(Object.create(Object.getPrototypeOf(extension) as object) as PGliteExtension, extension, { loadOnUse: true }))
  }
  const { sharedPreloadLibraries: _preload, ...rest } = extension
  return Object.freeze({ ...rest, loadOnUse: true })
}
