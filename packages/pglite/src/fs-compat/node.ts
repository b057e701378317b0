import { EmscriptenBuiltinFilesystem } from './filesystem.js'

/** A database in a host directory (Node), as `dataDir: '<path>'`; PGlite's `NodeFS`. */
export class NodeFS extends EmscriptenBuiltinFilesystem {
  protected rootDir: string

  constructor(dataDir: string) {
    super(dataDir)
    this.rootDir = dataDir
  }
}
