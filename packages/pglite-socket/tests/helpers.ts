/** Shared helpers of the pglite-socket tests: servers, raw wire clients, child processes. */
import { spawn, type ChildProcess } from 'node:child_process'
import { connect, type Socket } from 'node:net'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import pg from 'pg'
import { afterAll, beforeAll } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { Waiters, within } from '@pgwasm/test-support/async'
import { HOST } from '@pgwasm/test-support/net'
import { run, type ProcessResult } from '@pgwasm/test-support/processes'
import { PGliteServer, type PGliteServerOptions } from '../src/index.js'

export interface Served {
  server: PGliteServer
  port: number
  url: string
}

/** Starts a TCP server on 127.0.0.1 with a free port. */
export async function serve(db: PGlite, options: Omit<PGliteServerOptions, 'db'> = {}): Promise<Served> {
  const server = new PGliteServer({ host: HOST, port: 0, ...options, db })
  const address = await server.start()
  if (!('port' in address)) throw new Error('expected a TCP address')
  return { server, port: address.port, url: server.connectionString }
}

/** A server that a suite run against both pgwasm-server and native PostgreSQL talks to. */
export interface SuiteTarget {
  port: number
  stop(): Promise<void>
}

/** pgwasm-server on a fresh in-memory database, as a {@link SuiteTarget}: stopping it closes the database too. */
export async function servedTarget(options: Omit<PGliteServerOptions, 'db'> = {}): Promise<SuiteTarget> {
  const db = await PGlite.create()
  const served = await serve(db, options)
  return {
    port: served.port,
    stop: async () => {
      await served.server.stop()
      await db.close()
    },
  }
}

/** A connected pg client of a TCP server (errors after a test's end are kept, not thrown). */
export async function pgClient(port: number, config: pg.ClientConfig = {}): Promise<TestClient> {
  const client = new pg.Client({ host: HOST, port, user: 'postgres', database: 'postgres', ...config }) as TestClient
  client.errors = []
  client.on('error', (err) => client.errors.push(err))
  await client.connect()
  return client
}

export type TestClient = pg.Client & { errors: Error[] }

/** A fresh database for the enclosing `describe` block (the hooks are registered here). */
export function useDatabase(setup?: (db: PGlite) => Promise<unknown>): { readonly db: PGlite } {
  let db: PGlite | undefined
  beforeAll(async () => {
    db = await PGlite.create()
    if (setup) await setup(db)
  })
  afterAll(async () => {
    await db?.close()
  })
  return {
    get db(): PGlite {
      if (!db) throw new Error('the database is made in beforeAll')
      return db
    },
  }
}

export interface ServedDatabase extends Served {
  readonly db: PGlite
  /** A pg client of the server, ended after the block. */
  connect(config?: pg.ClientConfig): Promise<TestClient>
}

/**
 * A fresh database served on 127.0.0.1 and a free port for the enclosing
 * `describe` block: started in beforeAll (after `setup`), stopped in
 * afterAll with the clients `connect` made.
 */
export function useServedDatabase(options: Omit<PGliteServerOptions, 'db'> = {}, setup?: (db: PGlite) => Promise<unknown>): ServedDatabase {
  const database = useDatabase(setup)
  let served: Served | undefined
  const clients: TestClient[] = []
  const started = (): Served => {
    if (!served) throw new Error('the server is started in beforeAll')
    return served
  }
  beforeAll(async () => {
    served = await serve(database.db, options)
  })
  afterAll(async () => {
    await Promise.all(clients.map((c) => endQuietly(c)))
    await served?.server.stop()
  })
  return {
    get db(): PGlite {
      return database.db
    },
    get server(): PGliteServer {
      return started().server
    },
    get port(): number {
      return started().port
    },
    get url(): string {
      return started().url
    },
    async connect(config: pg.ClientConfig = {}): Promise<TestClient> {
      const client = await pgClient(started().port, config)
      clients.push(client)
      return client
    },
  }
}

/** Ends a pg client, ignoring one that is gone already. */
export async function endQuietly(client: pg.Client | undefined): Promise<void> {
  if (!client) return
  await client.end().catch(() => {})
}

// ---------------------------------------------------------------------------
// Raw wire protocol

const utf8 = new TextEncoder()

export function int32(n: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(n >>> 0)
  return b
}

/** A frontend frame: type byte, int32 length, body. */
export function frame(type: string | number, body: Uint8Array = new Uint8Array(0)): Buffer {
  const t = typeof type === 'string' ? type.charCodeAt(0) : type
  return Buffer.concat([Buffer.from([t]), int32(4 + body.length), body])
}

export function cstr(...values: string[]): Buffer {
  return Buffer.from(utf8.encode(values.map((v) => `${v}\u0000`).join('')))
}

/** A protocol 3.0 startup packet. */
export function startupPacket(params: Record<string, string> = { user: 'postgres', database: 'postgres' }): Buffer {
  const body = Buffer.concat([
    int32(196608),
    ...Object.entries(params).map(([k, v]) => cstr(k, v)),
    Buffer.from([0]),
  ])
  return Buffer.concat([int32(4 + body.length), body])
}

export function queryFrame(sql: string): Buffer {
  return frame('Q', cstr(sql))
}

export interface BackendMessage {
  type: string
  body: Buffer
}

/** Fields of an ErrorResponse / NoticeResponse body by their code letter. */
export function errorFields(body: Buffer): Record<string, string> {
  const fields: Record<string, string> = {}
  let at = 0
  while (at < body.length && body[at] !== 0) {
    const code = String.fromCharCode(body[at]!)
    const end = body.indexOf(0, at + 1)
    if (end < 0) throw new Error(`unterminated field ${code} in ${body.toString('hex')}`)
    fields[code] = body.subarray(at + 1, end).toString('utf8')
    at = end + 1
  }
  return fields
}

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

/** The process id and secret the server's BackendKeyData gave a `pg` client. */
export function backendKey(client: pg.Client): { processId: number; secret: number } {
  const keyed = client as unknown as { processID: number; secretKey: number }
  return { processId: keyed.processID, secret: keyed.secretKey }
}

// ---------------------------------------------------------------------------
// The CLI as a child process

const packageDir = resolve(fileURLToPath(new URL('.', import.meta.url)), '..')
const repoRoot = resolve(packageDir, '../..')
const cliPath = join(packageDir, 'src', 'cli.ts')
const tsxLoader = pathToFileURL(join(repoRoot, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href
/** How long the CLI may take to print what a test waits for. */
const CLI_MS = 60_000

/** The CLI as a child process (through tsx from source, or built), killed in `kill()`. */
export class Cli {
  readonly child: ChildProcess
  stdout = ''
  stderr = ''
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly #printed = new Waiters()

  /** `built`: the bundled `dist/cli.js`, as installed, instead of the source; `script`: another program of the tests', run the same way. */
  constructor(args: string[], { built = false, script }: { built?: boolean; script?: string } = {}) {
    const entry = built ? [join(packageDir, 'dist', 'cli.js')] : ['--import', tsxLoader, script ?? cliPath]
    this.child = spawn(process.execPath, [...entry, ...args], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: cliEnv(),
    })
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.stdout += d
      this.#printed.wake()
    })
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.stderr += d
      this.#printed.wake()
    })
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })))
    void this.exited.then(() => this.#printed.wake())
  }

  /** Resolves with the first match of `pattern` in stdout. */
  async waitFor(pattern: RegExp): Promise<RegExpExecArray> {
    const found = (async () => {
      for (;;) {
        const m = pattern.exec(this.stdout)
        if (m) return m
        if (this.child.exitCode !== null || this.child.signalCode !== null) {
          throw new Error(`the CLI exited before printing ${pattern}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)
        }
        await this.#printed.next()
      }
    })()
    return within(found, CLI_MS, `the CLI to print ${pattern}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL')
  }
}

/** Runs the CLI (through tsx from source) to its end; `env` replaces the test's environment without PGWASM_PASSWORD. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = cliEnv()): Promise<ProcessResult> {
  return run(process.execPath, ['--import', tsxLoader, cliPath, ...args], { timeoutMs: CLI_MS, cwd: repoRoot, env })
}

/** The test's environment without a password for the CLI to pick up. */
export function cliEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env.PGWASM_PASSWORD
  return env
}
