import { spawn, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import { Socket } from 'node:net'
import { dirname, join } from 'node:path'
import { serialize } from 'pg-protocol'
import { startupMessage } from '../protocol.js'

/** The size of each CopyData frame sent: what a driver streaming a file sends (psql sends a line per frame). */
const FRAME_BYTES = 64 * 1024

/** Backend messages of a raw connection, one at a time. */
class Replies {
  #buffer: Buffer = Buffer.alloc(0)
  #waiter: (() => void) | undefined
  #closed: Error | undefined

  constructor(socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? d : Buffer.concat([this.#buffer, d])
      this.#waiter?.()
    })
    socket.on('close', () => {
      this.#closed = new Error('the server closed the connection')
      this.#waiter?.()
    })
    socket.on('error', (err) => {
      this.#closed = err
      this.#waiter?.()
    })
  }

  /** Reads messages until one of `types`; throws on an ErrorResponse. Returns the bodies of DataRows seen on the way. */
  async until(types: string): Promise<Buffer[]> {
    const rows: Buffer[] = []
    for (;;) {
      while (this.#buffer.length >= 5) {
        const length = this.#buffer.readInt32BE(1)
        if (this.#buffer.length < length + 1) break
        const type = String.fromCharCode(this.#buffer[0]!)
        const body = this.#buffer.subarray(5, length + 1)
        this.#buffer = this.#buffer.subarray(length + 1)
        if (type === 'E') throw new Error(`server error: ${body.toString('utf8').replace(/\0/g, ' ').trim()}`)
        // A password or SASL request: this raw client speaks trust authentication only.
        if (type === 'R' && body.readInt32BE(0) !== 0) throw new Error(`the server asks for authentication (method ${body.readInt32BE(0)}); this client needs trust`)
        if (type === 'D') rows.push(Buffer.from(body))
        if (types.includes(type)) return rows
      }
      if (this.#closed) throw this.#closed
      await new Promise<void>((resolve) => (this.#waiter = resolve))
      this.#waiter = undefined
    }
  }
}

/** Starts the workspace's `pgwasm-server` on a free port, with its defaults (a large COPY streams into the engine); resolves with its port. */
async function startServer(): Promise<{ child: ChildProcess; port: number }> {
  const pkg = createRequire(join(process.cwd(), 'package.json')).resolve('@pgwasm/pglite-socket/package.json')
  const child = spawn(process.execPath, [join(dirname(pkg), 'dist', 'cli.js'), '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /serving .* at postgresql:\/\/\S+:(\d+)\//.exec(out)
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', (code) => reject(new Error(`pgwasm-server exited ${code}: ${out}`)))
  })
  return { child, port }
}

/**
 * Loads `parts` (COPY text) with COPY FROM STDIN through a `pgwasm-server`
 * process, as a driver streaming a file would; times the COPY statement
 * from its Query to its ReadyForQuery and checks the row count after.
 */
export async function copyThroughServer(parts: readonly string[], rows: number): Promise<number> {
  const { child, port } = await startServer()
  try {
    return await copyOverWire({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' }, parts, rows)
  } finally {
    child.kill('SIGINT')
    await new Promise((resolve) => child.once('exit', resolve))
  }
}

/** The same load by the same client into the native server at `url` (trust authentication), into a new table `b`. */
export async function copyThroughNative(url: string, parts: readonly string[], rows: number): Promise<number> {
  const u = new URL(url)
  const target = {
    host: u.hostname,
    port: Number(u.port || 5432),
    user: decodeURIComponent(u.username || 'postgres'),
    database: decodeURIComponent(u.pathname.slice(1) || 'postgres'),
  }
  return copyOverWire(target, parts, rows)
}

async function copyOverWire(
  target: { host: string; port: number; user: string; database: string },
  parts: readonly string[],
  rows: number,
): Promise<number> {
  const socket = new Socket()
  try {
    const replies = new Replies(socket)
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject)
      socket.connect(target.port, target.host, resolve)
    })
    const send = async (bytes: Uint8Array): Promise<void> => {
      if (!socket.write(bytes)) await new Promise((resolve) => socket.once('drain', resolve))
    }
    await send(startupMessage(target.user, target.database))
    await replies.until('Z')
    await send(serialize.query('drop table if exists b; create table b (id int, v text)'))
    await replies.until('Z')
    const t = performance.now()
    await send(serialize.query('copy b from stdin'))
    await replies.until('G')
    for (const part of parts) {
      const bytes = Buffer.from(part)
      for (let at = 0; at < bytes.length; at += FRAME_BYTES) await send(serialize.copyData(bytes.subarray(at, at + FRAME_BYTES)))
    }
    await send(serialize.copyDone())
    await replies.until('Z')
    const ms = performance.now() - t
    await send(serialize.query('select count(*) from b'))
    const [row] = await replies.until('Z')
    const counted = Number(row!.subarray(6).toString())
    if (counted !== rows) throw new Error(`loaded ${counted} rows over the wire, expected ${rows}`)
    await send(serialize.query('drop table b'))
    await replies.until('Z')
    return ms
  } finally {
    socket.destroy()
  }
}
