/**
 * `@electric-sql/pglite/opfs-ahp`'s `OpfsAhpFS`: a database kept in the
 * origin private file system, as `dataDir: 'opfs-ahp://<name>'` (in a
 * dedicated worker; see the package README). Its pool options are accepted
 * and ignored: pgwasm keeps the files in memory and journals each commit
 * to one file per generation instead of a pool of handles.
 * @packageDocumentation
 */
import { EmscriptenBuiltinFilesystem } from './filesystem.js'

/** Options PGlite's OPFS file system takes (accepted and ignored). */
export interface OpfsAhpOptions {
  initialPoolSize?: number
  maintainedPoolSize?: number
  debug?: boolean
}

/** PGlite's OPFS file system: the same database as `dataDir: 'opfs-ahp://<name>'`. */
export class OpfsAhpFS extends EmscriptenBuiltinFilesystem {
  constructor(dataDir: string, _options: OpfsAhpOptions = {}) {
    super(dataDir.startsWith('opfs-ahp://') ? dataDir : `opfs-ahp://${dataDir}`)
  }
}
