import { EmscriptenBuiltinFilesystem } from './filesystem.js'

/** An in-memory database, as `dataDir: 'memory://'`; PGlite's `MemoryFS`. */
export class MemoryFS extends EmscriptenBuiltinFilesystem {
  constructor() {
    super('memory://')
  }
}
