/**
 * The small part of the Emscripten module objects (`pglite.js`, `initdb.js`)
 * that the host calls. Facts in `docs/engine.md`; keep in sync
 * with the pinned `@electric-sql/pglite` version.
 */

export interface FsNode {
  name: string
  mode: number
  parent: FsNode
  mount: unknown
  contents: Uint8Array | Record<string, FsNode> | null
  usedBytes: number
  timestamp?: number
  atime: number
  mtime: number
  ctime: number
  node_ops: { mknod(parent: FsNode, name: string, mode: number, dev: number): FsNode }
  /** Ours: the contents array is shared with a template and must be copied before a write. */
  pgwasmShared?: boolean
}

export interface FsStream {
  fd: number
  node: FsNode
  position: number
  flags: number
  path: string
}

export interface FsStat {
  mode: number
  size: number
  mtime: Date
}

export type StreamWrite = (
  stream: FsStream,
  buffer: Uint8Array,
  offset: number,
  length: number,
  position: number,
  canOwn?: boolean,
) => number

export interface EmscriptenFs {
  root: FsNode
  mkdir(path: string, mode?: number): FsNode
  mkdirTree(path: string, mode?: number): void
  writeFile(path: string, data: Uint8Array | string, opts?: { canOwn?: boolean }): void
  readFile(path: string): Uint8Array
  open(path: string, flags: string): FsStream
  close(stream: FsStream): void
  readdir(path: string): string[]
  stat(path: string): FsStat
  lstat(path: string): FsStat
  isDir(mode: number): boolean
  isFile(mode: number): boolean
  unlink(path: string): void
  rmdir(path: string): void
  chmod(path: string, mode: number): void
  utime(path: string, atime: number, mtime: number): void
  analyzePath(path: string): { exists: boolean; object: FsNode | null }
  lookupPath(path: string, opts?: { follow?: boolean }): { path: string; node: FsNode }
  cwd(): string
  getStream(fd: number): { path: string } | null
  mount(type: unknown, opts: Record<string, unknown>, mountpoint: string): void
  unmount(mountpoint: string): void
  registerDevice(dev: number, ops: Record<string, unknown>): void
  mkdev(path: string, mode: number, dev?: number): void
  makedev(major: number, minor: number): number
  chdir(path: string): void
  quit(): void
  syncfs(populate: boolean, cb: (err: unknown) => void): void
  ErrnoError: new (errno: number) => Error
  filesystems: Record<string, unknown>
}

/** MEMFS' directory node operations we wrap (memory-budget.ts). */
export interface MemFsDirOps {
  unlink(parent: FsNode, name: string): void
  rename(node: FsNode, newDir: FsNode, newName: string): void
}

export interface MemFs {
  ops_table: { file: { stream: { write: StreamWrite } }; dir: { node: MemFsDirOps } } | null
  stream_ops: { write: StreamWrite }
  /** Makes `node.contents` hold at least `capacity` bytes (looked up on MEMFS at each write). */
  expandFileStorage(node: FsNode, capacity: number): void
  /** Sets the file's length (ftruncate, fallocate), looked up on MEMFS at each call. */
  resizeFileStorage(node: FsNode, size: number): void
}

interface ModuleBase {
  FS: EmscriptenFs
  ENV: Record<string, string>
  HEAPU8: Uint8Array
  UTF8ToString(ptr: number, maxBytes?: number): string
  stringToUTF8OnStack(s: string): number
  addFunction(fn: (...args: number[]) => number, signature: string): number
  removeFunction(fp: number): void
  callMain(args: string[]): number
  _pgl_set_system_fn(fp: number): void
  _pgl_set_popen_fn(fp: number): void
  _pgl_set_pclose_fn(fp: number): void
  _fopen(path: number, mode: number): number
  _fclose(stream: number): number
  _pclose(stream: number): number
}

export interface PostgresModule extends ModuleBase {
  MEMFS: MemFs
  NODEFS: unknown
  PROXYFS: unknown
  IDBFS: unknown
  stackSave(): number
  stackRestore(sp: number): void
  _pgl_set_rw_cbs(readFp: number, writeFp: number): void
  _pgl_setPGliteActive(active: number): number
  _pgl_startPGlite(): void
  _pgl_run_atexit_funcs(): void
  _pgl_getMyProcPort(): number
  _pgl_sendConnData(): void
  _pgl_pq_flush(): void
  _pgl_freopen(path: number, mode: number, fd: number): number
  _ProcessStartupPacket(port: number, sslDone: number, gssDone: number): number
  _PostgresMainLoopOnce(): void
  _PostgresMainLongJmp(): void
  _PostgresSendReadyForQueryIfNecessary(): void
  _pq_buffer_remaining_data(): number
  _IsTransactionBlock(): number
  _emscripten_force_exit(status: number): void
}

export type InitdbModule = ModuleBase

/** Options object handed to an Emscripten factory; extra keys stay on the module. */
export interface ModuleOptions<M> {
  thisProgram: string
  arguments: string[]
  noExitRuntime: boolean
  wasmMemory?: WebAssembly.Memory
  instantiateWasm(
    imports: WebAssembly.Imports,
    done: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void,
  ): Record<string, never>
  getPreloadedPackage?(name: string, size: number): ArrayBuffer
  locateFile?(path: string, prefix: string): string
  print(text: string): void
  printErr(text: string): void
  stdin(): number | null
  preRun: Array<(mod: M) => void>
  onRuntimeInitialized?: () => void
}

export type ModuleFactory<M> = (options: ModuleOptions<M>) => Promise<M>

/** Emscripten throws this (not an Error) on `exit()`. */
export interface ExitStatusLike {
  name: 'ExitStatus'
  status: number
}

export function isExitStatus(e: unknown): e is ExitStatusLike {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'ExitStatus'
}
