/**
 * Raw wire clients: they send bytes as built (frontend.ts) and split what
 * the server sends into messages, against pgwasm-server or native PostgreSQL.
 */
import { connect, type Socket } from 'node:net'
import { Worker } from 'node:worker_threads'
import { Waiters, within } from './async.js'
import type { BackendMessage } from './backend.js'
import { int32, startupPacket } from './frontend.js'
import { HOST } from './net.js'

/** What the server sent, split into messages as they are asked for. */
abstract class BackendReader {
  #buffer = Buffer.alloc(0)
  readonly #changes = new Waiters()
  #isClosed = false

  get isClosed(): boolean {
    return this.#isClosed
  }

  abstract write(bytes: Uint8Array): void

  protected received(data: Uint8Array): void {
    this.#buffer = Buffer.concat([this.#buffer, data])
    this.#changes.wake()
  }

  protected ended(): void {
    this.#isClosed = true
    this.#changes.wake()
  }

  /** The next single byte (the answer to an SSLRequest), or undefined if the server closed. */
  async readByte(): Promise<string | undefined> {
    while (this.#buffer.length === 0) {
      if (this.#isClosed) return undefined
      await this.#changes.next()
    }
    const b = this.#buffer.subarray(0, 1).toString('latin1')
    this.#buffer = this.#buffer.subarray(1)
    return b
  }

  /** The next whole backend message, or undefined once the server closed. */
  async next(): Promise<BackendMessage | undefined> {
    for (;;) {
      if (this.#buffer.length >= 5) {
        const length = this.#buffer.readUInt32BE(1)
        if (this.#buffer.length >= 1 + length) {
          const message = {
            type: String.fromCharCode(this.#buffer[0]!),
            body: Buffer.from(this.#buffer.subarray(5, 1 + length)),
          }
          this.#buffer = this.#buffer.subarray(1 + length)
          return message
        }
      }
      if (this.#isClosed) return undefined
      await this.#changes.next()
    }
  }

  /** Messages until one of type `type` (included), or until the server closed. */
  async until(type: string): Promise<BackendMessage[]> {
    const out: BackendMessage[] = []
    for (;;) {
      const m = await this.next()
      if (!m) return out
      out.push(m)
      if (m.type === type) return out
    }
  }

  /** Every message until the server closes the connection. */
  async rest(): Promise<BackendMessage[]> {
    const out: BackendMessage[] = []
    for (;;) {
      const m = await this.next()
      if (!m) return out
      out.push(m)
    }
  }

  abstract readonly connected: Promise<void>

  /** Startup without password: returns the messages up to ReadyForQuery. */
  async handshake(params?: Record<string, string>): Promise<BackendMessage[]> {
    await this.connected
    this.write(startupPacket(params))
    const messages = await this.until('Z')
    if (messages.at(-1)?.type !== 'Z') throw new Error(`no ReadyForQuery: ${JSON.stringify(messages.map((m) => m.type))}`)
    return messages
  }
}

/**
 * A raw socket client that splits what the server sends into messages.
 * Before `expectBytes` the first reply may be a single byte ('N' to an SSLRequest).
 */
export class RawClient extends BackendReader {
  readonly socket: Socket
  readonly closed: Promise<void>
  readonly connected: Promise<void>

  constructor(port: number) {
    super()
    this.socket = connect({ host: HOST, port })
    this.socket.on('error', () => {})
    this.connected = new Promise((resolve) => this.socket.once('connect', () => resolve()))
    this.closed = new Promise((resolve) =>
      this.socket.once('close', () => {
        this.ended()
        resolve()
      }),
    )
    this.socket.on('data', (data: Buffer) => this.received(data))
  }

  write(bytes: Uint8Array): void {
    this.socket.write(bytes)
  }

  destroy(): void {
    this.socket.destroy()
  }
}

/** The socket end of {@link ThreadClient}: relays bytes both ways with its parent. */
const THREAD_CLIENT_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const socket = require('node:net').connect({ host: workerData.host, port: workerData.port })
socket.on('error', () => {})
socket.on('connect', () => parentPort.postMessage({ connected: true }))
socket.on('data', (data) => parentPort.postMessage({ data }))
socket.on('close', () => parentPort.postMessage({ closed: true }))
parentPort.on('message', (m) => {
  if (m.write) socket.write(m.write)
  else if (m.destroy) socket.destroy()
})
`

/**
 * A raw client whose socket lives in a worker thread: it goes on sending
 * while the server's thread is busy, as a client in another process does
 * (a socket of the server's own thread could not).
 */
export class ThreadClient extends BackendReader {
  readonly #worker: Worker
  readonly closed: Promise<void>
  readonly connected: Promise<void>

  constructor(port: number) {
    super()
    this.#worker = new Worker(THREAD_CLIENT_SOURCE, { eval: true, workerData: { host: HOST, port } })
    let connected!: () => void
    let closed!: () => void
    this.connected = new Promise((resolve) => (connected = resolve))
    this.closed = new Promise((resolve) => (closed = resolve))
    this.#worker.on('message', (m: { connected?: true; data?: Uint8Array; closed?: true }) => {
      if (m.connected) connected()
      if (m.data) this.received(m.data)
      if (m.closed) {
        this.ended()
        closed()
        void this.#worker.terminate()
      }
    })
  }

  write(bytes: Uint8Array): void {
    this.#worker.postMessage({ write: bytes })
  }

  destroy(): void {
    this.#worker.postMessage({ destroy: true })
  }
}

/** Runs `fn` with a raw client past startup, and destroys the client afterwards. */
export async function withRawClient<T>(port: number, fn: (raw: RawClient) => Promise<T>): Promise<T> {
  const raw = new RawClient(port)
  try {
    await raw.handshake()
    return await fn(raw)
  } finally {
    raw.destroy()
  }
}

/** Sends a CancelRequest on a new connection, as libpq does, and resolves once the server has closed it. */
export async function sendCancelRequest(port: number, processId: number, secret: number): Promise<void> {
  const socket = connect(port, HOST)
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  socket.end(Buffer.concat([int32(16), int32(80877102), int32(processId), int32(secret)]))
  await within(new Promise((resolve) => socket.once('close', resolve)), 5000, 'the cancel connection to close')
}
