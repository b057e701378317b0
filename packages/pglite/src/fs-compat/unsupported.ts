import type { DataDirArchive, DumpCompression } from '../fs/dump.js'
import { unsupported, type Filesystem, type FilesystemHost } from './filesystem.js'

/**
 * A PGlite file system pgwasm does not run the engine on (OPFS and the
 * memory front-end over a storage back-end). It constructs, so code that
 * picks a file system by feature still loads; every use rejects with an
 * EngineError (`BAD_DATA_DIR`) naming the class and what to use instead.
 */
export class UnsupportedFilesystem implements Filesystem {
  protected readonly dataDir?: string

  constructor(dataDir?: string) {
    this.dataDir = dataDir
  }

  init(_pg: FilesystemHost, _emscriptenOptions: Record<string, unknown>): Promise<{ emscriptenOpts: Record<string, unknown> }> {
    return Promise.reject(unsupported(this))
  }

  syncToFs(_relaxedDurability?: boolean): Promise<void> {
    return Promise.reject(unsupported(this))
  }

  initialSyncFs(): Promise<void> {
    return Promise.reject(unsupported(this))
  }

  dumpTar(_dbname: string, _compression?: DumpCompression): Promise<DataDirArchive> {
    return Promise.reject(unsupported(this))
  }

  async closeFs(): Promise<void> {}
}
