import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs'
import type { Server, Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { DoorFacts } from '../pooler/multiplexer.js'
import type { StartedElsewhere } from '../session/session.js'
import { passwordExchange } from '../session/password-exchange.js'
import type { AuthMethod } from '../session/auth.js'
import { cancelHelperProgram } from './cancel-helper-program.js'

/** Cancels the board keeps; a reader that falls further behind misses the oldest. */
const SLOTS = 256
/** The board: the count of cancels (u32) and then SLOTS slots of seq, pid and secret (u32 each). */
const BOARD_BYTES = 4 + SLOTS * 12
/** How long a server waits for the helper before it serves without one (it starts in about 50 ms). */
const START_TIMEOUT_MS = 3_000
/** How long the helper outlives the last server it helps, for one that starts soon after. */
const LINGER_MS = 2_000
/** After the slots: the heartbeat of a running statement (f64 ms), then the door card (u32 length, JSON). */
const HEARTBEAT_AT = BOARD_BYTES
const CARD_AT = HEARTBEAT_AT + 8
/** Within a busy spell the door card is written again this often (a login that ran in the same spell may have changed it). */
const CARD_EVERY_MS = 100

/**
 * What the helper may let in while the server's thread runs a statement,
 * per database name (`*`: any name): the settings a client there was last
 * told at startup, and the roles that may log in.
 */
export interface DoorCard {
  /** Clients the server can still take. */
  readonly room: number
  /** Cancel keys reserved for clients started by the helper (process id, secret). */
  readonly keys: readonly (readonly [number, number])[]
  readonly databases: Readonly<Record<string, DoorFacts>>
}

/** What the helper hands to one server. */
export interface HelpedServer {
  /** A connection the helper accepted, with what it read of it (to be read first). */
  connection(socket: Socket, head: Uint8Array): void
  /** A CancelRequest, for a statement that waits for the engine (see {@link CancelHelper.canceledWhileRunning} for one that runs). */
  cancel(processId: number, secret: number): void
  /** Whom the helper may start while the server is busy; undefined: nobody (it hands every connection over). */
  door(): DoorCard | undefined
  /** A connection the helper started (it has had ReadyForQuery), with what it sent since. */
  started(socket: Socket, head: Uint8Array, client: StartedElsewhere): void
  /**
   * The helper's password exchange for the client it gave the key with
   * process id `processId` failed: the key is not used. `address`: where a
   * wrong password came from (undefined when the exchange broke off).
   */
  authFailed(processId: number, address: string | undefined): void
  /** The password clients prove (the helper then runs the same exchange); undefined: none. */
  readonly password?: { readonly method: AuthMethod; readonly password: string }
}

type HelperMessage =
  | { type: 'ready' }
  | { type: 'serving' | 'closed'; key: string }
  | { type: 'connection'; key: string; head: string }
  | { type: 'cancel'; key: string; seq: number; pid: number; secret: number }
  | { type: 'started'; key: string; head: string; processId: number; secret: number; params: [string, string][]; told: [string, string][] }
  | { type: 'authFailed'; key: string; processId: number; address?: string }

/**
 * While the engine runs a statement, the server's thread reads no socket:
 * a CancelRequest would wait in the kernel until the statement ended. So a
 * helper process accepts on the server's listening sockets too (Node shares
 * a listening socket with a child process). It writes each CancelRequest to
 * a small file, the board, which the server reads where the engine calls
 * out while it works (`EngineLease.stopWhen`), and hands every other
 * connection back to the server. One helper serves every server of the
 * process; it ends with the process, or soon after the last server stops.
 */
export class CancelHelper {
  static #shared: Promise<CancelHelper | undefined> | undefined
  /** The process's helper once it runs (undefined: none, or gone). */
  static current: CancelHelper | undefined
  /** Why the last start failed, for the server's warning. */
  static startError: Error | undefined

  /**
   * The process's helper, started on first use; undefined where it cannot
   * run (Windows; a runtime whose executable is not Node's: Bun, Deno,
   * Electron; {@link startError} says which) or did not start.
   */
  static shared(): Promise<CancelHelper | undefined> {
    const versions = process.versions as Record<string, string | undefined>
    const runtime = versions.bun !== undefined ? 'Bun' : versions.deno !== undefined ? 'Deno' : versions.electron !== undefined ? 'Electron' : undefined
    if (process.platform === 'win32' || runtime) {
      // Passing a listening socket to a child process is Node's, on Unix (Deno's node:child_process closes it instead).
      CancelHelper.startError = new Error(`the cancel helper needs Node on Unix, and this is ${runtime ?? 'Windows'}; statement_timeout and maxStatementMs still stop any statement`)
      return Promise.resolve(undefined)
    }
    CancelHelper.#shared ??= CancelHelper.#start().then(
      (helper) => {
        CancelHelper.startError = undefined
        CancelHelper.current = helper
        return helper
      },
      (err: unknown) => {
        CancelHelper.#shared = undefined
        CancelHelper.startError = err instanceof Error ? err : new Error(String(err))
        return undefined
      },
    )
    return CancelHelper.#shared
  }

  static async #start(): Promise<CancelHelper> {
    const dir = mkdtempSync(join(tmpdir(), 'pgwasm-cancel-'))
    const path = join(dir, 'board')
    let board: number | undefined
    try {
      board = openSync(path, 'w+', 0o600)
      const { NODE_OPTIONS: _ignored, ...env } = process.env
      // Transpilers that keep function names (tsx, vitest) call a `__name` helper the text does not carry.
      // The password exchange goes as text too: the helper checks passwords with the server's own code.
      const source = `const __name = (target) => target;(${cancelHelperProgram.toString()})(${JSON.stringify(path)}, ${SLOTS}, ${passwordExchange.toString()})`
      const child = spawn(process.execPath, ['--max-old-space-size=32', '-e', source], {
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
        env,
      })
      const helper = new CancelHelper(child, board)
      await helper.#reply('ready')
      return helper
    } catch (err) {
      if (board !== undefined) closeSync(board)
      throw err
    } finally {
      // Both sides hold it open: the name is no longer needed.
      rmSync(dir, { recursive: true, force: true })
    }
  }

  readonly #child: ChildProcess
  readonly #board: number
  readonly #read = Buffer.alloc(BOARD_BYTES)
  readonly #servers = new Map<string, HelpedServer>()
  readonly #replies = new Map<string, (failure?: Error) => void>()
  #nextKey = 0
  /** The last cancel the board was read up to. */
  #scanned = 0
  /** Cancels handled from their message before the board was read that far: the board skips them. */
  readonly #viaMessage = new Set<number>()
  /** Cancels that stopped a running statement: their message does nothing more. */
  readonly #viaBoard = new Set<number>()
  #linger: ReturnType<typeof setTimeout> | undefined
  #gone = false
  /** When the door card was last written; 0: not in this busy spell. */
  #cardAt = 0
  #restScheduled = false
  readonly #beat = Buffer.alloc(8)

  private constructor(child: ChildProcess, board: number) {
    this.#child = child
    this.#board = board
    child.unref()
    ;(child.channel as { unref?: () => void } | null | undefined)?.unref?.()
    child.on('message', (message: HelperMessage, handle?: Socket) => this.#receive(message, handle))
    child.on('error', (err) => this.#end(err))
    child.on('exit', (code, signal) => this.#end(new Error(`the cancel helper exited (${signal ?? `code ${code}`})`)))
  }

  /**
   * Shares `server`'s listening socket with the helper until the returned
   * function is called (before the server closes, so that the helper stops
   * accepting on its port).
   */
  async serve(server: Server, target: HelpedServer): Promise<() => Promise<void>> {
    if (this.#gone) return async () => {}
    clearTimeout(this.#linger)
    const key = String(++this.#nextKey)
    this.#servers.set(key, target)
    const serving = this.#reply(`serving:${key}`)
    // Over the IPC channel only: the password is never written to the board's file.
    this.#child.send({ type: 'serve', key, auth: target.password }, server)
    await serving
    return async () => {
      if (!this.#servers.delete(key) || this.#gone) return
      const closed = this.#reply(`closed:${key}`)
      this.#child.send({ type: 'close', key })
      await closed.catch(() => {})
      if (this.#servers.size === 0) {
        this.#linger = setTimeout(() => this.#stop(), LINGER_MS)
        this.#linger.unref()
      }
    }
  }

  /**
   * Whether a CancelRequest for this client arrived since the board was
   * last read. Called while the engine runs the client's statement, so it
   * only reads a file.
   */
  canceledWhileRunning(processId: number, secret: number): boolean {
    if (this.#gone) return false
    this.#heartbeat()
    if (readSync(this.#board, this.#read, 0, 4, 0) < 4) return false
    const count = this.#read.readUInt32BE(0)
    if (count === this.#scanned) return false
    readSync(this.#board, this.#read, 4, BOARD_BYTES - 4, 4)
    let hit = false
    for (let seq = Math.max(this.#scanned + 1, count - SLOTS + 1); seq <= count; seq++) {
      const at = 4 + (seq % SLOTS) * 12
      if (this.#read.readUInt32BE(at) !== seq || this.#viaMessage.has(seq)) continue
      if (this.#read.readUInt32BE(at + 4) === processId >>> 0 && this.#read.readUInt32BE(at + 8) === secret >>> 0) {
        hit = true
        this.#viaBoard.add(seq)
      }
    }
    this.#scanned = count
    for (const seq of this.#viaMessage) if (seq <= count) this.#viaMessage.delete(seq)
    return hit
  }

  /** This thread runs a statement (an in-process caller's, say): new clients get in meanwhile (see {@link #heartbeat}). */
  busy(): void {
    if (!this.#gone) this.#heartbeat()
  }

  /**
   * Tells the helper that this thread runs a statement (it is asked every
   * ~10 ms while one runs), with the door card of every server it helps at
   * the start of the spell and every {@link CARD_EVERY_MS} after, so that new
   * clients get in meanwhile.
   */
  #heartbeat(): void {
    const now = Date.now()
    if (now - this.#cardAt > CARD_EVERY_MS) {
      this.#writeCard()
      this.#cardAt = now
    }
    this.#beat.writeDoubleBE(now, 0)
    writeSync(this.#board, this.#beat, 0, 8, HEARTBEAT_AT)
    if (!this.#restScheduled) {
      this.#restScheduled = true
      // Runs once the event loop turns again: when the statement has ended.
      setImmediate(this.#rest)
    }
  }

  /** The statement ended: the helper hands connections to this thread again at once. */
  readonly #rest = (): void => {
    this.#restScheduled = false
    this.#cardAt = 0
    if (this.#gone) return
    this.#beat.writeDoubleBE(0, 0)
    writeSync(this.#board, this.#beat, 0, 8, HEARTBEAT_AT)
  }

  #writeCard(): void {
    const cards: Record<string, DoorCard> = {}
    for (const [key, target] of this.#servers) {
      const card = target.door()
      if (card) cards[key] = card
    }
    const text = Buffer.from(JSON.stringify(cards))
    const length = Buffer.alloc(4)
    length.writeUInt32BE(text.length, 0)
    writeSync(this.#board, text, 0, text.length, CARD_AT + 4)
    writeSync(this.#board, length, 0, 4, CARD_AT)
  }

  #receive(message: HelperMessage, handle: Socket | undefined): void {
    switch (message.type) {
      case 'ready':
        return this.#replies.get('ready')?.()
      case 'serving':
      case 'closed':
        return this.#replies.get(`${message.type}:${message.key}`)?.()
      case 'connection': {
        const target = this.#servers.get(message.key)
        if (!handle) return
        if (!target) {
          handle.destroy()
          return
        }
        target.connection(handle, Buffer.from(message.head, 'base64'))
        return
      }
      case 'started': {
        const target = this.#servers.get(message.key)
        if (!handle) return
        if (!target) return void handle.destroy()
        const client = { processId: message.processId, secret: message.secret, params: new Map(message.params), told: new Map(message.told) }
        target.started(handle, Buffer.from(message.head, 'base64'), client)
        return
      }
      case 'authFailed':
        return this.#servers.get(message.key)?.authFailed(message.processId | 0, message.address)
      case 'cancel': {
        if (this.#viaBoard.delete(message.seq)) return
        if (message.seq > this.#scanned) this.#viaMessage.add(message.seq)
        // Signed, as the BackendKeyData that carried them.
        this.#servers.get(message.key)?.cancel(message.pid | 0, message.secret | 0)
      }
    }
  }

  #reply(name: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#replies.delete(name)
        reject(new Error(`the cancel helper did not answer '${name}'`))
      }, START_TIMEOUT_MS)
      this.#replies.set(name, (failure?: Error) => {
        clearTimeout(timer)
        this.#replies.delete(name)
        if (failure) reject(failure)
        else resolve()
      })
    })
  }

  #stop(): void {
    if (this.#servers.size > 0) return
    this.#end(new Error('the cancel helper was stopped'))
    this.#child.kill()
  }

  #end(why: Error): void {
    if (this.#gone) return
    this.#gone = true
    if (CancelHelper.#shared) CancelHelper.#shared = undefined
    if (CancelHelper.current === this) CancelHelper.current = undefined
    closeSync(this.#board)
    for (const settle of [...this.#replies.values()]) settle(why)
  }
}
