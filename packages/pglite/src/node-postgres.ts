/**
 * `@pgwasm/pglite/node-postgres`: node-postgres (`pg`) clients on a PGlite
 * instance in the same process, no socket, as
 * `@electric-sql/pglite/node-postgres` provides:
 *
 * ```ts
 * import pg from 'pg'
 * import { createPgConfig } from '@pgwasm/pglite/node-postgres'
 *
 * const pool = new pg.Pool(createPgConfig(db))
 * ```
 *
 * `pg` takes the config's `connection` in place of its socket connection;
 * every message it sends is run on the instance with `execProtocolRaw`, and
 * the reply parsed back into the events `pg` listens to. The instance is one
 * session, so the pool holds one client (`poolSize: 1`).
 * @packageDocumentation
 */
import { EventEmitter } from 'node:events'
import { Parser as WireParser } from 'pg-protocol/dist/parser.js'
import { BackendKeyDataMessage, ParameterStatusMessage, ReadyForQueryMessage, type BackendMessage } from 'pg-protocol/dist/messages.js'
import { serialize } from 'pg-protocol/dist/serializer.js'
import type { PGliteOptions } from './options.js'
import { PGlite } from './pglite.js'

/** The part of `PGlite` the connection calls. */
export type PgliteHandle = Pick<PGlite, 'waitReady' | 'execProtocolRaw' | 'query' | 'isInTransaction'>

/** What `PGlitePgConfig` is made from. */
export interface Config {
  pglite: PgliteHandle
}

// Not `instanceof`: the CommonJS build of this entry carries its own copy
// of the PGlite class, so an instance from the root entry is not one of it.
function isPglite(value: unknown): value is PgliteHandle {
  return typeof value === 'object' && value !== null && typeof (value as Partial<PgliteHandle>).execProtocolRaw === 'function'
}

type BindConfig = Parameters<typeof serialize.bind>[0]
type ParseConfig = Parameters<typeof serialize.parse>[0]
type ExecConfig = Parameters<typeof serialize.execute>[0]
type PortalConfig = Parameters<typeof serialize.describe>[0]

/**
 * Stands in for `pg`'s socket connection: the same methods and events, over
 * one PGlite instance. Messages of an extended-protocol sequence are held
 * until `sync()` or `flush()` and run together, as one exec.
 */
export class PglitePgConnection extends EventEmitter {
  _connecting = false
  /** `pg` destroys the stream to drop a connection; here that ends it. */
  readonly stream: { destroy: () => void }
  parsedStatements = {}
  submittedNamedStatements = {}
  readonly #db: Promise<PgliteHandle>
  #pending: Uint8Array[] = []
  // One exec at a time, in the order `pg` sent them.
  #chain: Promise<void> = Promise.resolve()
  #ended = false

  constructor(config: Config) {
    super()
    this.#db = config.pglite.waitReady.then(() => config.pglite)
    this.stream = { destroy: () => this.#end() }
  }

  async connect(_port: number, _host: string): Promise<void> {
    this._connecting = true
    await this.#db
    this.emit('connect')
  }

  /** TLS means nothing in process: the reply is a refusal, as a server without TLS gives. */
  requestSsl(): void {
    this.emit('error', new Error('The server does not support SSL connections'))
  }

  /**
   * Answers the handshake here, as pgwasm's socket server does: the
   * instance is already a started session, and its startup packet path is
   * for a fresh engine.
   */
  startup(_config: Record<string, string>): void {
    this.#chain = this.#chain.then(() => this.#greet())
  }

  cancel(_processID: number, _secretKey: number): void {}

  password(password: string): void {
    this.#send(serialize.password(password), true)
  }

  sendSASLInitialResponseMessage(mechanism: string, initialResponse: string): void {
    this.#send(serialize.sendSASLInitialResponseMessage(mechanism, initialResponse), true)
  }

  sendSCRAMClientFinalMessage(additionalData: string): void {
    this.#send(serialize.sendSCRAMClientFinalMessage(additionalData), true)
  }

  query(text: string): void {
    this.#send(serialize.query(text), true)
  }

  parse(query: ParseConfig): void {
    this.#send(serialize.parse(query), false)
  }

  bind(config: BindConfig): void {
    this.#send(serialize.bind(config), false)
  }

  execute(config: ExecConfig): void {
    this.#send(serialize.execute(config), false)
  }

  flush(): void {
    this.#send(serialize.flush(), true)
  }

  sync(): void {
    this.#send(serialize.sync(), true)
  }

  end(): void {
    this.#end()
  }

  close(msg: PortalConfig): void {
    this.#send(serialize.close(msg), false)
  }

  describe(msg: PortalConfig): void {
    this.#send(serialize.describe(msg), false)
  }

  sendCopyFromChunk(chunk: Uint8Array): void {
    this.#send(serialize.copyData(chunk as Buffer), false)
  }

  endCopyFrom(): void {
    this.#send(serialize.copyDone(), true)
  }

  sendCopyFail(msg: string): void {
    this.#send(serialize.copyFail(msg), true)
  }

  ref(): void {}

  unref(): void {}

  async #greet(): Promise<void> {
    if (this.#ended) return
    try {
      const db = await this.#db
      const { rows } = await db.query<{ version: string; pid: number; encoding: string; datestyle: string; timezone: string }>(
        "SELECT current_setting('server_version') AS version, pg_backend_pid() AS pid, current_setting('client_encoding') AS encoding," +
          " current_setting('DateStyle') AS datestyle, current_setting('TimeZone') AS timezone",
      )
      const settings = rows[0]!
      this.#emitMessage({ name: 'authenticationOk', length: 8 })
      const status: [string, string][] = [
        ['server_version', settings.version],
        ['server_encoding', 'UTF8'],
        ['client_encoding', settings.encoding],
        ['DateStyle', settings.datestyle],
        ['TimeZone', settings.timezone],
        ['integer_datetimes', 'on'],
        ['standard_conforming_strings', 'on'],
      ]
      for (const [name, value] of status) this.#emitMessage(new ParameterStatusMessage(0, name, value))
      this.#emitMessage(new BackendKeyDataMessage(12, settings.pid, 0))
      this.#emitMessage(new ReadyForQueryMessage(5, db.isInTransaction() ? 'T' : 'I'))
    } catch (err) {
      this.emit('error', err)
    }
  }

  #emitMessage(message: BackendMessage | { name: 'authenticationOk'; length: number }): void {
    this.emit('message', message)
    this.emit(message.name === 'error' ? 'errorMessage' : message.name, message)
  }

  #send(bytes: Uint8Array, run: boolean): void {
    if (this.#ended) return
    this.#pending.push(bytes)
    if (!run) return
    const frames = concat(this.#pending)
    this.#pending = []
    this.#chain = this.#chain.then(() => this.#run(frames))
  }

  async #run(frames: Uint8Array): Promise<void> {
    if (this.#ended) return
    try {
      const db = await this.#db
      const reply = await db.execProtocolRaw(frames)
      // A fresh parser per reply: every reply ends on a message boundary.
      new WireParser().parse(Buffer.from(reply), (message: BackendMessage) => this.#emitMessage(message))
    } catch (err) {
      this.emit('error', err)
    }
  }

  #end(): void {
    if (this.#ended) return
    this.#ended = true
    this.#pending = []
    // After what is already running, as a socket closes after its writes.
    void this.#chain.then(() => this.emit('end'))
  }
}

/**
 * A `pg` client or pool config whose connection is a PGlite instance. The
 * fixed credentials only satisfy `pg`: the instance runs every message as
 * its own user.
 */
export class PGlitePgConfig {
  readonly connection: PglitePgConnection
  readonly poolSize = 1
  readonly password = 'dummy'
  readonly user = 'postgres'
  readonly database = 'postgres'
  readonly port = 5432
  readonly host = 'localhost'

  constructor(config: Config) {
    this.connection = new PglitePgConnection(config)
  }
}

/**
 * A config for `new pg.Client(config)` or `new pg.Pool(config)` on `pglite`
 * (owned by the caller: ending the client leaves it open), or on a new
 * instance made from `dataDir`/`options`.
 */
export function createPgConfig(pglite: PgliteHandle): PGlitePgConfig
export function createPgConfig(options?: PGliteOptions): PGlitePgConfig
export function createPgConfig(dataDir?: string, options?: PGliteOptions): PGlitePgConfig
export function createPgConfig(first?: PgliteHandle | PGliteOptions | string, options?: PGliteOptions): PGlitePgConfig {
  const pglite = isPglite(first) ? first : typeof first === 'string' ? new PGlite(first, options) : new PGlite(first)
  return new PGlitePgConfig({ pglite })
}

function concat(chunks: readonly Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!
  let length = 0
  for (const chunk of chunks) length += chunk.length
  const out = new Uint8Array(length)
  let at = 0
  for (const chunk of chunks) {
    out.set(chunk, at)
    at += chunk.length
  }
  return out
}
