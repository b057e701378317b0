import { EmscriptenBuiltinFilesystem } from './filesystem.js'

/**
 * A browser database kept in IndexedDB, as `dataDir: 'idb://<name>'`;
 * PGlite's `IdbFs`. `name` may carry the `idb://` prefix or not.
 */
export class IdbFs extends EmscriptenBuiltinFilesystem {
  constructor(name: string) {
    super(name.startsWith('idb://') ? name : `idb://${name}`)
  }
}
