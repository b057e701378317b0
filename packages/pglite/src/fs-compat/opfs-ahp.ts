/**
 * `@electric-sql/pglite/opfs-ahp`'s `OpfsAhpFS`, by name only: pgwasm does not
 * run the engine on OPFS access handles. A browser database persists with
 * `dataDir: 'idb://<name>'`; using this class rejects with an EngineError.
 * @packageDocumentation
 */
import { UnsupportedFilesystem } from './unsupported.js'

/** Options PGlite's OPFS file system takes (accepted and ignored). */
export interface OpfsAhpOptions {
  initialPoolSize?: number
  maintainedPoolSize?: number
  debug?: boolean
}

/** PGlite's OPFS access-handle-pool file system: unsupported here (see the module note). */
export class OpfsAhpFS extends UnsupportedFilesystem {
  constructor(dataDir: string, _options: OpfsAhpOptions = {}) {
    super(dataDir)
  }
}
