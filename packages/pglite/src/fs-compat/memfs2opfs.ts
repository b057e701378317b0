/**
 * `@electric-sql/pglite/memfs2opfs`'s `Memfs2OpfsFS` and `OpfsBackend`, by
 * name only: pgwasm does not persist to OPFS (a browser database persists
 * with `dataDir: 'idb://<name>'`); using them rejects with an EngineError.
 * @packageDocumentation
 */
import { unsupported } from './filesystem.js'
import { MemfsFrontendFS } from './memfs-frontend.js'

/** Options PGlite's memory-to-OPFS file system takes (accepted and ignored). */
export interface Memfs2OpfsOptions {
  maxConcurrentWrites?: number
  debug?: boolean
}

/** PGlite's OPFS storage back-end: unsupported here (see the module note). */
export class OpfsBackend {
  readonly dataDir: string

  constructor(dataDir: string, _options: Pick<Memfs2OpfsOptions, 'maxConcurrentWrites'> = {}) {
    this.dataDir = dataDir
  }

  /** @throws {EngineError} code `BAD_DATA_DIR`, always. */
  init(): Promise<never> {
    return Promise.reject(unsupported(this))
  }
}

/** PGlite's memory file system persisted to OPFS: unsupported here (see the module note). */
export class Memfs2OpfsFS extends MemfsFrontendFS {
  constructor(dataDir: string, options: Memfs2OpfsOptions = {}) {
    super(new OpfsBackend(dataDir, options), options)
  }
}
