import { EventEmitter } from 'node:events'
import { chmod, lstat, mkdir, stat, unlink } from 'node:fs/promises'
import { dirname } from 'node:path'
import { createConnection, createServer, isIP, type AddressInfo, type Server, type Socket } from 'node:net'
import { CancelHelper, type DoorCard } from './cancel-helper.js'
import { DatabaseHost, type HostOptions } from './host.js'
import { peerLeft, peerMayBeInProcess, readNow, socketFd } from '../wire/socket-now.js'
import { newProcessKey, Session, type StartedElsewhere, type Transport } from '../session/session.js'
import { errorResponse } from '../wire/wire.js'

export interface PGliteServerOptions extends HostOptions {
  /** TCP host. @default '127.0.0.1' */
  readonly host?: string
  /** TCP port; 0 picks a free one. @default 5432 */
  readonly port?: number
  /** A Unix socket path instead of TCP (created owner-only). */
  readonly path?: string
  /** More clients than this get SQLSTATE 53300. @default 100 */
  readonly maxConnections?: number
  /** Allow a non-loopback `host` without a `password` (an empty one counts as none). @default false */
  readonly trustRemote?: boolean
  /**
   * Output a client has not read yet beyond which the server drops that
   * client (its transaction is rolled back). Below it, a client with more
   * than 4 MiB unread gets no new request run until it reads. @default 268435456 (256 MiB)
   */
  readonly maxUnreadBytes?: number
  /**
   * Unread output of all clients together beyond which the client whose
   * output passes it is dropped: without it, clients that never read could
   * make the server hold `maxUnreadBytes` times `maxConnections`.
   * @default 1073741824 (1 GiB)
   */
  readonly maxUnreadBytesTotal?: number
  /**
   * Bytes received from all clients together and not yet taken (a message
   * still arriving, frames waiting for the engine) beyond which the client
   * whose bytes pass it is ended with FATAL 53200: without it, clients that
   * announce huge messages and send them slowly could make the server hold
   * up to a message's limit (1 GiB) each. @default 1073741824 (1 GiB)
   */
  readonly maxIncomingBytesTotal?: number
  /**
   * Let a CancelRequest stop a statement while it runs, through a small
   * helper process that shares the listening socket (see the README). Off:
   * only a statement that waits for the engine can be canceled. @default true
   */
  readonly cancelRunning?: boolean
}

/** Below this a client's unread output (or its held input) is not worth adding up with the others'. */
const UNREAD_SUM_FROM = 4 * 1024 * 1024
/** Clients the cancel helper can start in one busy spell before the rest wait (each needs a cancel key reserved here). */
const DOOR_KEYS = 8

export type ServerAddress = { readonly host: string; readonly port: number } | { readonly path: string }

/**
 * Serves a PGlite database over the PostgreSQL wire protocol, to many clients
 * at once (see Multiplexer for how they share its one session).
 *
 * Events: `listening` (address), `connection` (processId), `disconnect`
 * (processId), `warning` (message), `error` (err).
 *
 * @example
 * ```ts
 * const server = new PGliteServer({ db: await PGlite.create(), port: 0 })
 * const address = await server.start()
 * ```
 */
export class PGliteServer extends EventEmitter {
  readonly #options: PGliteServerOptions
  readonly #host: DatabaseHost
  readonly #sessions = new Set<Session>()
  readonly #sockets = new Set<Socket>()
  #server: Server | undefined
  #address: ServerAddress | undefined
  #unhelp: (() => Promise<void>) | undefined
  #helped: Promise<boolean> | undefined

  constructor(options: PGliteServerOptions) {
    super()
    this.#options = options
    this.#host = new DatabaseHost(options)
  }

  /** The databases other than the main one that are loaded now (they unload after `idleDatabaseMs` without a client). */
  get loadedDatabases(): readonly string[] {
    return this.#host.loadedDatabases
  }

  /** Output waiting in every client's socket. */
  #unreadBytes(): number {
    let total = 0
    for (const socket of this.#sockets) total += socket.writableLength
    return total
  }

  /** Bytes every client sent that the server holds and has not taken yet. */
  #incomingBytes(): number {
    let total = 0
    for (const session of this.#sessions) total += session.heldInputBytes
    return total
  }

  /** Where the server listens, once started. */
  get address(): ServerAddress | undefined {
    return this.#address
  }

  /** A `postgres://` URL (TCP) or libpq-style string (Unix socket) for clients. */
  get connectionString(): string {
    const a = this.#address
    if (!a) throw new Error('the server is not started')
    if ('path' in a) {
      // libpq finds the socket as <host dir>/.s.PGSQL.<port>.
      const dir = a.path.slice(0, a.path.lastIndexOf('/')) || '/'
      const port = /\/\.s\.PGSQL\.(\d+)$/.exec(a.path)?.[1] ?? '5432'
      return `postgresql://postgres@localhost/postgres?host=${encodeURIComponent(dir)}&port=${port}`
    }
    const host = a.host.includes(':') ? `[${a.host}]` : a.host
    return `postgresql://postgres@${host}:${a.port}/postgres`
  }

  get connections(): number {
    return this.#sessions.size
  }

  /**
   * Starts listening.
   * @throws when the port is taken, the path is in use, or a non-loopback
   *   host is given without a password or `trustRemote`.
   */
  async start(): Promise<ServerAddress> {
    if (this.#server) throw new Error('the server is already started')
    const o = this.#options
    const host = o.host ?? '127.0.0.1'
    if (!o.path && !isLoopback(host)) {
      // An empty password is no password: nothing to guess.
      if (!o.password && !o.trustRemote) {
        throw new Error(`listening on ${host} lets other machines in: set a non-empty \`password\`, or \`trustRemote\` to accept that`)
      }
      if (!o.password) this.#warn(`listening on ${host} with no password: anyone who can reach it has full access`)
    }
    const helping = o.cancelRunning === false ? undefined : CancelHelper.shared()
    await this.#host.init()
    const server = createServer({ noDelay: true }, (socket) => this.#accept(socket))
    if (o.path) {
      await makeSocketFolder(o.path)
      await removeStaleSocket(o.path)
    }
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        const where = o.path ?? `${host}:${o.port ?? 5432}`
        reject(
          err.code === 'EADDRINUSE'
            ? new Error(`${where} is already in use`, { cause: err })
            : err.code === 'EACCES'
              ? new Error(`cannot listen on ${where}: permission denied${o.path ? ` (can this user create files in ${dirname(o.path)}?)` : ''}`, { cause: err })
              : err,
        )
      }
      server.once('error', onError)
      const ready = (): void => {
        server.off('error', onError)
        resolve()
      }
      if (o.path) server.listen(o.path, ready)
      else server.listen(o.port ?? 5432, host, ready)
    })
    server.on('error', (err) => this.emit('error', err))
    if (o.path) {
      await chmod(o.path, 0o600)
      this.#address = { path: o.path }
    } else {
      const info = server.address() as AddressInfo
      this.#address = { host: info.address, port: info.port }
    }
    this.#server = server
    // Not awaited: spawning the helper would add about 0.1 s to the first start of a process.
    this.#helped = helping ? this.#attachHelper(server, helping) : Promise.resolve(false)
    this.emit('listening', this.#address)
    return this.#address
  }

  /**
   * Resolves once a CancelRequest can stop a running statement (the cancel
   * helper shares the listening socket): true, or false where it cannot
   * (`cancelRunning: false`, Windows, a helper that did not start; the
   * server warns then). Until then only a waiting statement can be canceled.
   */
  get cancelReady(): Promise<boolean> {
    return this.#helped ?? Promise.resolve(false)
  }

  async #attachHelper(server: Server, helping: Promise<CancelHelper | undefined>): Promise<boolean> {
    const helper = await helping
    if (!helper) {
      if (CancelHelper.startError) this.#warn(`a running statement cannot be canceled: ${CancelHelper.startError.message}`)
      return false
    }
    if (this.#server !== server) return false
    const unhelp = await helper
      .serve(server, {
        connection: (socket, head) => {
          if (this.#server !== server) return void socket.destroy()
          socket.setNoDelay(true)
          this.#accept(socket, head)
        },
        cancel: (processId, secret) => this.#host.cancel(processId, secret),
        door: () => this.#door(),
        password: this.#host.password === undefined ? undefined : { method: this.#host.authMethod, password: this.#host.password },
        authFailed: (processId, address) => {
          const reserved = this.#doorKeys.findIndex(([pid]) => pid === processId)
          if (reserved >= 0) this.#doorKeys.splice(reserved, 1)
          if (address !== undefined) this.#host.authThrottle.failed(address)
        },
        started: (socket, head, client) => {
          const reserved = this.#doorKeys.findIndex(([pid, secret]) => pid === client.processId && secret === client.secret)
          // Only a key this server reserved for the helper.
          if (this.#server !== server || reserved < 0) return void socket.destroy()
          this.#doorKeys.splice(reserved, 1)
          socket.setNoDelay(true)
          this.#accept(socket, head, client)
        },
      })
      .catch((err: unknown) => {
        this.#warn(`a running statement cannot be canceled: ${err instanceof Error ? err.message : String(err)}`)
        return undefined
      })
    if (!unhelp) return false
    this.#unhelp = unhelp
    this.#host.cancelHelper = helper
    // Stopped meanwhile: stop() found nothing to undo yet.
    if (this.#server !== server) await this.#releaseHelper()
    return this.#server === server
  }

  async #releaseHelper(): Promise<void> {
    const unhelp = this.#unhelp
    this.#unhelp = undefined
    this.#host.cancelHelper = undefined
    await unhelp?.()
  }

  /** Cancel keys the helper may give clients it starts while this thread runs a statement. */
  readonly #doorKeys: (readonly [number, number])[] = []

  #door(): DoorCard | undefined {
    const databases = this.#host.doorFacts()
    if (Object.keys(databases).length === 0) return undefined
    while (this.#doorKeys.length < DOOR_KEYS) {
      const key = newProcessKey()
      this.#doorKeys.push([key.processId, key.secret])
    }
    const room = (this.#options.maxConnections ?? 100) - this.#sessions.size
    return { room, keys: this.#doorKeys, databases }
  }

  /**
   * A new connection; `head`: what the cancel helper already read of it;
   * `started`: the helper started it while this thread ran a statement.
   */
  #accept(socket: Socket, head?: Uint8Array, started?: StartedElsewhere): void {
    const max = this.#options.maxConnections ?? 100
    this.#sockets.add(socket)
    socket.once('close', () => this.#sockets.delete(socket))
    if (this.#sessions.size >= max) {
      // Read and drop what it sends, and do not wait for it to close: a
      // refused socket must not keep stop() waiting.
      socket.on('error', () => {})
      socket.resume()
      socket.end(errorResponse('53300', 'sorry, too many clients already', 'FATAL'), () => socket.destroy())
      return
    }
    const maxUnread = this.#options.maxUnreadBytes ?? 256 * 1024 * 1024
    const maxUnreadTotal = this.#options.maxUnreadBytesTotal ?? 1024 * 1024 * 1024
    const session = new Session(
      this.#host,
      {
      write: (bytes) => {
        if (socket.destroyed) return
        socket.write(bytes)
        // A client that does not read must not make the server hold its results without end,
        // nor many such clients together.
        const unread = socket.writableLength
        if (unread > maxUnread || (unread > UNREAD_SUM_FROM && this.#unreadBytes() > maxUnreadTotal)) socket.destroy()
      },
      end: () => {
        if (socket.destroyed) return
        // A peer that never closes its side must not keep the connection slot.
        socket.end(() => socket.destroy())
        setTimeout(() => socket.destroy(), END_GRACE_MS).unref()
      },
      remoteAddress: socket.remoteAddress ?? 'local',
      ...(socket.remotePort !== undefined ? { remotePort: socket.remotePort } : {}),
      get backlogBytes() {
        return socket.writableLength
      },
      peerLeft: () => peerLeft(socket, (bytes) => session.receiveEarly(bytes)),
      ...readsNow(socket),
      drained: () =>
        new Promise<void>((resolve) => {
          if (socket.destroyed || socket.writableLength === 0) return resolve()
          const done = (): void => {
            socket.off('drain', done)
            socket.off('close', done)
            resolve()
          }
          socket.on('drain', done)
          socket.on('close', done)
        }),
      },
      started,
    )
    this.#sessions.add(session)
    this.emit('connection', session.processId)
    const maxIncomingTotal = this.#options.maxIncomingBytesTotal ?? 1024 * 1024 * 1024
    const receive = (data: Uint8Array): void => {
      session.receive(data)
      // Many clients' half-sent messages together must not take the server's memory.
      const held = session.heldInputBytes
      if (held > UNREAD_SUM_FROM && this.#incomingBytes() > maxIncomingTotal) {
        session.terminate('53200', `out of memory: clients' unfinished messages would take more than the server's limit of ${maxIncomingTotal} bytes (this one's has ${held} so far)`)
        socket.destroy()
      }
    }
    if (head && head.length > 0) receive(head)
    socket.on('data', receive)
    socket.on('error', () => session.disconnected())
    socket.on('close', () => {
      session.disconnected()
      this.#sessions.delete(session)
      this.emit('disconnect', session.processId)
    })
  }

  #warn(message: string): void {
    if (this.listenerCount('warning') > 0) this.emit('warning', message)
    else console.warn(`pgwasm-server: ${message}`)
  }

  /** Stops listening, ends every client (rolling back open transactions) and closes databases the server created. */
  async stop(): Promise<void> {
    const server = this.#server
    if (!server) return
    this.#server = undefined
    // The helper stops accepting on the port first: it must be free once stop() resolves.
    await this.#helped
    this.#helped = undefined
    await this.#releaseHelper()
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    const sessions = [...this.#sessions]
    for (const s of sessions) s.disconnected()
    await Promise.all(sessions.map((s) => s.cleanup()))
    // A client that never closes its side must not keep stop() waiting.
    for (const socket of this.#sockets) socket.destroy()
    await closed
    await this.#host.closeCreated()
    if (this.#options.path) await unlink(this.#options.path).catch(() => {})
    this.#address = undefined
  }
}

/** How long an ended connection may take to flush before it is cut. */
const END_GRACE_MS = 5_000

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'))
}

/** A socket file left by a crashed server blocks listen(); one that answers is in use. */
async function removeStaleSocket(path: string): Promise<void> {
  const stat = await lstat(path).catch(() => undefined)
  if (!stat) return
  if (!stat.isSocket()) throw new Error(`${path} exists and is not a socket`)
  const inUse = await new Promise<boolean>((resolve) => {
    const probe = createConnection(path)
    probe.once('connect', () => {
      probe.destroy()
      resolve(true)
    })
    probe.once('error', () => resolve(false))
  })
  if (inUse) throw new Error(`${path} is already in use`)
  await unlink(path)
}

/**
 * Creates the folder of a Unix socket path when it is missing (owner-only,
 * as PostgreSQL's socket directories are), one level at a time: Node's
 * recursive mkdir never returns for some paths (under /proc).
 */
async function makeSocketFolder(path: string): Promise<void> {
  const missing: string[] = []
  let dir = dirname(path)
  for (;;) {
    const st = await stat(dir).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? undefined : Promise.reject(err)))
    if (st) {
      if (!st.isDirectory()) throw new Error(`cannot listen on ${path}: ${dir} is not a folder`)
      break
    }
    missing.unshift(dir)
    const parent = dirname(dir)
    if (parent === dir) break
    dir = parent
  }
  for (const folder of missing) {
    await mkdir(folder, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw new Error(`cannot listen on ${path}: the folder ${folder} is missing and could not be created (${err.code})`, { cause: err })
    })
  }
}

/**
 * The Transport's synchronous reads of `socket` (session/session-host.ts), where it has a
 * descriptor: only while Node holds nothing it read but did not deliver,
 * and never for a client in this thread (it could not send meanwhile).
 */
function readsNow(socket: Socket): Pick<Transport, 'readNow' | 'readNowReady'> {
  const fd = socketFd(socket)
  if (fd === undefined) return {}
  let inProcess: boolean | undefined
  return {
    readNow: (into) => readNow(fd, into),
    readNowReady: () =>
      socket.readableLength === 0 && !socket.isPaused() && !socket.destroyed && !(inProcess ??= peerMayBeInProcess(socket)),
  }
}
