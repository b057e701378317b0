import { Duplex } from 'node:stream'
import { DatabaseHost, type HostOptions } from './host.js'
import { Session } from '../session/session.js'
import type { SocketDatabase } from '../pooler/multiplexer.js'

const hosts = new WeakMap<SocketDatabase, DatabaseHost>()

/**
 * A Duplex that speaks the wire protocol to `db` in-process, through the
 * same multiplexer as the TCP server: `new pg.Client({ stream: () => createPgStream(db) })`.
 * For a `pg.Pool`, pass the factory (`stream: () => createPgStream(db)`) so each client gets its own.
 */
export function createPgStream(db: SocketDatabase, options: Omit<HostOptions, 'db'> = {}): PgStream {
  let host = hosts.get(db)
  if (!host || Object.keys(options).length > 0) {
    host = new DatabaseHost({ anyDatabaseName: true, ...options, db })
    if (Object.keys(options).length === 0) hosts.set(db, host)
  }
  return new PgStream(host)
}

/** The socket-shaped Duplex `pg` drives: connect(), setNoDelay(), setKeepAlive()... */
export class PgStream extends Duplex {
  readonly #host: DatabaseHost
  readonly #session: Session
  #ready: Promise<void> | undefined

  constructor(host: DatabaseHost) {
    super()
    this.#host = host
    this.#session = new Session(host, {
      write: (bytes) => {
        this.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
      },
      end: () => {
        this.push(null)
      },
    })
    this.once('close', () => this.#session.disconnected())
  }

  /** Mirrors net.Socket#connect: `connect` is emitted asynchronously. */
  connect(): this {
    this.#ready ??= this.#host.init()
    this.#ready.then(
      () => this.emit('connect'),
      (err: unknown) => this.destroy(err instanceof Error ? err : new Error(String(err))),
    )
    return this
  }

  setNoDelay(): this {
    return this
  }

  setKeepAlive(): this {
    return this
  }

  ref(): this {
    return this
  }

  unref(): this {
    return this
  }

  override _read(): void {
    // Output is pushed as the session produces it.
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#session.receive(chunk)
    callback()
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#session.disconnected()
    callback()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#session.disconnected()
    callback(error)
  }
}
