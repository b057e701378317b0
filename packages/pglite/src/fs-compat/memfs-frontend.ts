/**
 * `@electric-sql/pglite/memfs-frontend`'s `MemfsFrontendFS`, by name only:
 * pgwasm keeps the engine's memory file system itself and persists it to
 * a directory (Node) or IndexedDB (`idb://<name>`), not to a user storage
 * back-end; using this class rejects with an EngineError.
 * @packageDocumentation
 */
import { UnsupportedFilesystem } from './unsupported.js'

/** Options PGlite's memory front-end takes (accepted and ignored). */
export interface MemfsFrontendOptions {
  debug?: boolean
}

/** PGlite's memory file system over a storage back-end: unsupported here (see the module note). */
export class MemfsFrontendFS extends UnsupportedFilesystem {
  constructor(_backend: unknown, _options: MemfsFrontendOptions = {}) {
    super()
  }
}
