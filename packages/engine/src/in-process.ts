// The in-process engine (lib/postgres.mjs) loaded into this process and
// driven over the wire protocol, one request at a time: what the core will
// do with it, kept small enough to test the engine on its own.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { serialize } from 'pg-protocol'
import type { BuiltEngine } from './index.js'

/** The module's parts the host uses (Emscripten's runtime and our C exports). */
interface PostgresModule {
  FS: {
    mkdirTree(path: string, mode?: number): void
    writeFile(path: string, data: Uint8Array, opts?: { mode?: number }): void
    chmod(path: string, mode: number): void
  }
  HEAPU8: Uint8Array
  addFunction(fn: (ptr: number, length: number) => number, signature: string): number
  stringToUTF8(text: string, ptr: number, max: number): void
  lengthBytesUTF8(text: string): number
  _malloc(size: number): number
  _pgwasm_set_wire(read: number, write: number): void
  _pgwasm_start(argc: number, argv: number): number
  _pgwasm_message(): number
  _pgwasm_flush(): void
  _pgwasm_exit(code: number): void
  _pq_buffer_remaining_data(): number
  _IsTransactionBlock(): number
  /** Asked at each of the engine's turns for the host (host/interrupt-poll.c): true cancels the running statement. */
  pgwasmCancelRequested?: () => boolean
}

type PostgresFactory = (options: Record<string, unknown>) => Promise<PostgresModule>

/** The engine's install prefix inside its file system (configure's --prefix). */
const PREFIX = '/pgwasm'
const PGDATA = `${PREFIX}/data`
/** configure's --with-system-tzdata: where the backend looks for zone files. */
const ZONEINFO = '/usr/share/zoneinfo'
/** The zones a cluster made by initCluster (TZ=UTC) reads at start. */
const ZONES = ['UTC', 'GMT', 'Etc/UTC']

/** The engine ended (FATAL, exit) or never started; `log` is what it printed last. */
export class InProcessEngineError extends Error {
  constructor(
    message: string,
    readonly log: string[],
  ) {
    super(log.length > 0 ? `${message}\n${log.slice(-10).join('\n')}` : message)
    this.name = 'InProcessEngineError'
  }
}

function isExit(error: unknown): error is { status: number } {
  return typeof error === 'object' && error !== null && (error as { name?: unknown }).name === 'ExitStatus'
}

function copyTree(fs: PostgresModule['FS'], from: string, to: string, mode: number): void {
  fs.mkdirTree(to, mode)
  fs.chmod(to, mode)
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = join(from, entry.name)
    const target = `${to}/${entry.name}`
    if (entry.isDirectory()) copyTree(fs, source, target, mode)
    else fs.writeFile(target, readFileSync(source), { mode: statSync(source).mode & 0o777 })
  }
}

/** The answer when the backend wants COPY data the request did not bring. */
const COPY_FAIL = serialize.copyFail('COPY data ended with the request')
const SYNC = serialize.sync()

export interface InProcessOptions {
  /** The database to connect to (default postgres). */
  database?: string
  /** Extra server settings, as `-c name=value`. */
  settings?: Record<string, string>
  /**
   * A cancel another thread can send while a request runs on this one (the
   * engine blocks it): storing a non-zero value at index 0 cancels the
   * running statement (57014) at its next interrupt check, as a
   * CancelRequest would. The engine sets it back to 0 when it takes it.
   */
  cancel?: Int32Array
}

/** One backend of the in-process engine on a copy of a cluster, in this process's memory. */
export class InProcessBackend {
  private input: Uint8Array = new Uint8Array(0)
  private position = 0
  private output: Uint8Array[] = []
  /** The last bytes written: a request's output ends with ReadyForQuery ('Z', length 5, status) when it is complete. */
  private readonly tail = new Uint8Array(6)
  private ended = false
  /** The request ran out inside COPY FROM STDIN and was answered with CopyFail. */
  private starved = false
  /** What the session sent before its first request: ParameterStatus, BackendKeyData, ReadyForQuery. */
  greeting: Uint8Array = new Uint8Array(0)

  private constructor(
    private readonly mod: PostgresModule,
    /** What the backend printed last (its server log). */
    readonly log: string[],
  ) {}

  /** Loads the engine, copies `clusterDir` (made by initCluster) into its file system and starts a session. */
  static async start(engine: BuiltEngine, clusterDir: string, options: InProcessOptions = {}): Promise<InProcessBackend> {
    const factory = ((await import(pathToFileURL(join(engine.dir, 'lib', 'postgres.mjs')).href)) as { default: PostgresFactory }).default
    const log: string[] = []
    const keep = (line: string) => {
      log.push(line)
      if (log.length > 200) log.shift()
    }
    const mod = await factory({
      print: keep,
      printErr: keep,
      preRun: [
        (m: PostgresModule) => {
          copyTree(m.FS, join(engine.dir, 'share'), `${PREFIX}/share`, 0o755)
          copyTree(m.FS, join(engine.dir, 'lib'), `${PREFIX}/lib`, 0o755)
          // The backend finds its install through its own path: a file there will do.
          m.FS.mkdirTree(`${PREFIX}/bin`)
          m.FS.writeFile(`${PREFIX}/bin/postgres`, new Uint8Array(0), { mode: 0o755 })
          for (const zone of ZONES) {
            m.FS.mkdirTree(join(ZONEINFO, zone, '..'))
            m.FS.writeFile(join(ZONEINFO, zone), readFileSync(join(ZONEINFO, zone)))
          }
          copyTree(m.FS, clusterDir, PGDATA, 0o700)
        },
      ],
    })
    const backend = new InProcessBackend(mod, log)
    const cancel = options.cancel
    if (cancel) mod.pgwasmCancelRequested = () => Atomics.load(cancel, 0) !== 0 && Atomics.exchange(cancel, 0, 0) !== 0
    const settings = Object.entries({ io_method: 'sync', shared_buffers: '16MB', ...options.settings }).flatMap(([name, value]) => ['-c', `${name}=${value}`])
    const args = [`${PREFIX}/bin/postgres`, '--single', '-D', PGDATA, ...settings, options.database ?? 'postgres']
    // argv stays allocated: PostgreSQL keeps pointers into it.
    const argv = mod._malloc(4 * (args.length + 1))
    args.forEach((arg, i) => {
      const size = mod.lengthBytesUTF8(arg) + 1
      const ptr = mod._malloc(size)
      mod.stringToUTF8(arg, ptr, size)
      new DataView(mod.HEAPU8.buffer).setUint32(argv + 4 * i, ptr, true)
    })
    new DataView(mod.HEAPU8.buffer).setUint32(argv + 4 * args.length, 0, true)
    mod._pgwasm_set_wire(
      mod.addFunction((ptr, length) => backend.read(ptr, length), 'iii'),
      mod.addFunction((ptr, length) => backend.write(ptr, length), 'iii'),
    )
    backend.greeting = backend.call(() => mod._pgwasm_start(args.length, argv), 'the engine did not start')
    return backend
  }

  private read(ptr: number, length: number): number {
    if (this.position >= this.input.length) {
      // Only COPY FROM STDIN reads past a request's whole messages.
      this.input = COPY_FAIL
      this.position = 0
      this.starved = true
    }
    const count = Math.min(length, this.input.length - this.position)
    this.mod.HEAPU8.set(this.input.subarray(this.position, this.position + count), ptr)
    this.position += count
    return count
  }

  private write(ptr: number, length: number): number {
    const chunk = this.mod.HEAPU8.slice(ptr, ptr + length)
    this.output.push(chunk)
    if (length >= 6) this.tail.set(chunk.subarray(length - 6))
    else {
      this.tail.copyWithin(0, length)
      this.tail.set(chunk, 6 - length)
    }
    return length
  }

  private get endsWithReadyForQuery(): boolean {
    return this.tail[0] === 0x5a && this.tail[4] === 5
  }

  private call(work: () => number, failure: string): Uint8Array {
    if (this.ended) throw new InProcessEngineError('the engine has ended', this.log)
    this.output = []
    this.tail.fill(0)
    try {
      const status = work()
      if (status === 1) this.ended = true
      this.mod._pgwasm_flush()
    } catch (error) {
      this.ended = true
      if (isExit(error)) throw new InProcessEngineError(`${failure}: the backend exited with status ${error.status}`, this.log)
      throw error
    }
    const out = Buffer.concat(this.output)
    this.output = []
    return out
  }

  /** Runs whole frontend messages and returns every backend message they produced. */
  exec(messages: Uint8Array): Uint8Array {
    this.input = messages
    this.position = 0
    this.starved = false
    return this.call(() => {
      while (this.position < this.input.length || this.mod._pq_buffer_remaining_data() > 0) {
        if (this.mod._pgwasm_message() === 1) return 1
      }
      // A COPY of the extended protocol that failed waits for a Sync.
      if (this.starved && !this.endsWithReadyForQuery) {
        this.input = SYNC
        this.position = 0
        return this.mod._pgwasm_message()
      }
      return 0
    }, 'the request failed')
  }

  /** Whether the session is inside BEGIN ... COMMIT. */
  get inTransactionBlock(): boolean {
    return this.mod._IsTransactionBlock() !== 0
  }

  /** Ends the session as PostgreSQL does (a shutdown checkpoint). */
  close(): void {
    if (this.ended) return
    this.ended = true
    try {
      this.mod._pgwasm_exit(0)
    } catch (error) {
      if (!isExit(error) || error.status !== 0) throw error
    }
  }
}
