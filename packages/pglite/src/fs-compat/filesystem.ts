/**
 * PGlite's file-system classes (`fs` option), as shapes: pgwasm hosts the
 * engine's file system itself, so each built-in class only names where the
 * database lives (memory, a directory, IndexedDB), the same place its
 * `dataDir` spelling names. `fsDataDir(fs)` turns one into that spelling.
 */
import { EngineError } from '../errors.js'
import type { DataDirArchive, DumpCompression } from '../fs/dump.js'

/** Where a built-in file system keeps the database, as a `dataDir` string. */
/** @internal */
export const DATA_DIR = Symbol('pgwasm.fsDataDir')

/** The instance calls a file system gets: `dumpDataDir` for `dumpTar`. */
export interface FilesystemHost {
  dumpDataDir(compression?: DumpCompression): Promise<DataDirArchive>
}

/** What the `fs` option takes, as PGlite's `Filesystem` interface. */
export interface Filesystem {
  /** Called once, before the engine starts; returns the module options unchanged here. */
  init(pg: FilesystemHost, emscriptenOptions: Record<string, unknown>): Promise<{ emscriptenOpts: Record<string, unknown> }>
  /** Writes pending changes to the backing store (pgwasm does this itself after each commit). */
  syncToFs(relaxedDurability?: boolean): Promise<void>
  /** Reads the backing store in (pgwasm does this itself at start). */
  initialSyncFs(): Promise<void>
  /** The data directory as a tarball, as `dumpDataDir`. */
  dumpTar(dbname: string, compression?: DumpCompression): Promise<DataDirArchive>
  closeFs(): Promise<void>
}

/** File stats, as PGlite's `FsStats`. */
export interface FsStats {
  dev: number
  ino: number
  mode: number
  nlink: number
  uid: number
  gid: number
  rdev: number
  size: number
  blksize: number
  blocks: number
  atime: number
  mtime: number
  ctime: number
}

/** Emscripten errno values a custom file system throws, as PGlite's `ERRNO_CODES`. */
export const ERRNO_CODES = Object.freeze({
  EBADF: 8,
  EBADFD: 127,
  EEXIST: 20,
  EINVAL: 28,
  EISDIR: 31,
  ENODEV: 43,
  ENOENT: 44,
  ENOTDIR: 54,
  ENOTEMPTY: 55,
} as const)

/** The name of a built-in file system, as PGlite's `FsType`. */
export type FsType = 'nodefs' | 'idbfs' | 'memoryfs' | 'opfs-ahp' | 'memfs2opfs'

/**
 * A file system the engine host provides; subclasses say where the data
 * lives. Extending one (to count `init` calls, say) keeps its place.
 */
export class EmscriptenBuiltinFilesystem implements Filesystem {
  protected dataDir?: string
  protected pg?: FilesystemHost

  constructor(dataDir?: string) {
    this.dataDir = dataDir
  }

  /** Where this file system keeps the database, as a `dataDir` string. */
  [DATA_DIR](): string {
    return this.dataDir ?? 'memory://'
  }

  async init(pg: FilesystemHost, emscriptenOptions: Record<string, unknown>): Promise<{ emscriptenOpts: Record<string, unknown> }> {
    this.pg = pg
    return { emscriptenOpts: emscriptenOptions }
  }

  async syncToFs(_relaxedDurability?: boolean): Promise<void> {}

  async initialSyncFs(): Promise<void> {}

  async closeFs(): Promise<void> {}

  /** @throws {EngineError} code `BAD_DATA_DIR` before the instance called `init`. */
  dumpTar(_dbname: string, compression?: DumpCompression): Promise<DataDirArchive> {
    if (!this.pg) return Promise.reject(new EngineError('`dumpTar` needs the file system to be in use by an instance', { code: 'BAD_DATA_DIR' }))
    return this.pg.dumpDataDir(compression)
  }
}

/**
 * PGlite's base for user-written virtual file systems (Node-`fs`-like
 * calls on paths and descriptors). pgwasm's engine keeps its own file
 * system, so an instance given one refuses it (see {@link fsDataDir}); the
 * class is here so that code declaring one still compiles and loads.
 */
export abstract class BaseFilesystem implements Filesystem {
  protected dataDir?: string
  protected pg?: FilesystemHost
  readonly debug: boolean

  constructor(dataDir?: string, { debug = false }: { debug?: boolean } = {}) {
    this.dataDir = dataDir
    this.debug = debug
  }

  async syncToFs(_relaxedDurability?: boolean): Promise<void> {}

  async initialSyncFs(): Promise<void> {}

  async closeFs(): Promise<void> {}

  /** @throws {EngineError} code `BAD_DATA_DIR`: a custom file system never backs a pgwasm instance. */
  dumpTar(_dbname: string, _compression?: DumpCompression): Promise<DataDirArchive> {
    return Promise.reject(unsupported(this))
  }

  async init(pg: FilesystemHost, emscriptenOptions: Record<string, unknown>): Promise<{ emscriptenOpts: Record<string, unknown> }> {
    this.pg = pg
    return { emscriptenOpts: emscriptenOptions }
  }

  abstract chmod(path: string, mode: number): void
  abstract close(fd: number): void
  abstract fstat(fd: number): FsStats
  abstract lstat(path: string): FsStats
  abstract mkdir(path: string, options?: { recursive?: boolean; mode?: number }): void
  abstract open(path: string, flags?: string, mode?: number): number
  abstract readdir(path: string): string[]
  abstract read(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number
  abstract rename(oldPath: string, newPath: string): void
  abstract rmdir(path: string): void
  abstract truncate(path: string, len: number): void
  abstract unlink(path: string): void
  abstract utimes(path: string, atime: number, mtime: number): void
  abstract writeFile(path: string, data: string | Uint8Array, options?: { encoding?: string; mode?: number; flag?: string }): void
  abstract write(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number
}

/** The error for a file system pgwasm cannot run the engine on. */
export function unsupported(fs: object): EngineError {
  const name = fs.constructor?.name || 'this file system'
  return new EngineError(
    `\`fs: ${name}\` is not supported: pgwasm keeps the engine's files itself; pass \`dataDir\` (a directory, \`memory://\` or \`idb://<name>\`) or a built-in class (\`MemoryFS\`, \`NodeFS\`, \`IdbFs\`)`,
    { code: 'BAD_DATA_DIR' },
  )
}

/**
 * The `dataDir` a value of the `fs` option stands for: `memory://` for
 * `MemoryFS`, the directory for `NodeFS`, `idb://<name>` for `IdbFs`.
 * @throws {EngineError} code `BAD_DATA_DIR` for any other file system
 * (a custom `BaseFilesystem`, OPFS): pgwasm cannot run the engine on it.
 */
export function fsDataDir(fs: unknown): string {
  if (fs instanceof EmscriptenBuiltinFilesystem) return fs[DATA_DIR]()
  throw unsupported(typeof fs === 'object' && fs !== null ? fs : {})
}
