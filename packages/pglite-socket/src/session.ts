import { randomInt } from 'node:crypto'
import type { EngineLease } from '@pgwasm/pglite'
import { Authenticator, type AuthMethod } from './auth.js'
import { discardsListens, droppedDatabase, findListenChanges, isCopyFromStdin, quoteChannel } from './listen.js'
import type { Multiplexer, MuxClient } from './multiplexer.js'
import { OutputSplitter } from './output.js'
import { StatementRenamer } from './rename.js'
import {
  CLIENT_TYPES,
  EXTENDED_TYPES,
  Msg,
  StartupCode,
  authenticationOk,
  backendKeyData,
  concat,
  copyInResponse,
  cstrings,
  decodeUtf8,
  errorResponse,
  frame,
  parameterStatus,
  readCString,
  readInt32,
  readStartupParams,
  readyForQuery,
} from './wire.js'

/** Where a session's bytes come from and go to: a socket, or the in-process bridge. */
export interface Transport {
  write(bytes: Uint8Array): void
  /** Ends the connection after pending writes. */
  end(): void
}

/** What sessions share: the databases, limits and password settings of a server. */
export interface SessionHost {
  readonly password?: string
  readonly authMethod: AuthMethod
  readonly syncTimeoutMs: number
  readonly maxMessageBytes: number
  readonly serverVersion: string
  /** The multiplexer of the named database, creating its instance on first use. */
  database(name: string): Promise<Multiplexer>
  /** Called after a client ran `DROP DATABASE name`. */
  dropped(name: string): void
  cancel(processId: number, secret: number): void
  log(message: string): void
}

const MAX_STARTUP_BYTES = 10_000
const utf8 = new TextEncoder()
const SYNC = frame(Msg.Sync, new Uint8Array(0))

let nextProcessId = 1000

/**
 * One client connection: startup and authentication, framing of what it
 * sends, name rewriting, and its batches on the multiplexer. Reads are
 * serial: bytes that arrive while a batch runs wait in the buffer and form
 * the next batch.
 */
export class Session implements MuxClient {
  readonly processId = nextProcessId++
  readonly secret = randomInt(1, 0x7fffffff)
  readonly #host: SessionHost
  readonly #transport: Transport
  #buffer = new Uint8Array(16384)
  #start = 0
  #end = 0
  #state: 'startup' | 'auth' | 'ready' | 'closed' = 'startup'
  #pumping = false
  #auth: Authenticator | undefined
  #user = 'postgres'
  #mux: Multiplexer | undefined
  readonly #renamer: StatementRenamer
  readonly #splitter: OutputSplitter
  readonly #channels = new Set<string>()
  #inTransaction = false
  #unsynced = false
  #copy: Uint8Array[] | undefined
  #skipToSync = false
  #syncTimer: ReturnType<typeof setTimeout> | undefined
  #cleanedUp: Promise<void> | undefined

  constructor(host: SessionHost, transport: Transport) {
    this.#host = host
    this.#transport = transport
    this.#renamer = new StatementRenamer(`c${this.processId}_`)
    this.#splitter = new OutputSplitter()
  }

  get pinned(): boolean {
    return this.#state !== 'closed' && (this.#inTransaction || this.#unsynced)
  }

  get isClosed(): boolean {
    return this.#state === 'closed'
  }

  /** Bytes from the client. */
  receive(bytes: Uint8Array): void {
    if (this.#state === 'closed') return
    this.#appendInput(bytes)
    void this.#pump()
  }

  deliverNotification(notification: Uint8Array): void {
    if (this.#state === 'ready') this.#transport.write(notification)
  }

  #appendInput(bytes: Uint8Array): void {
    const length = this.#end - this.#start
    if (this.#end + bytes.length > this.#buffer.length) {
      if (length + bytes.length <= this.#buffer.length) {
        this.#buffer.copyWithin(0, this.#start, this.#end)
      } else {
        const grown = new Uint8Array(Math.max(length + bytes.length, this.#buffer.length * 2))
        grown.set(this.#buffer.subarray(this.#start, this.#end))
        this.#buffer = grown
      }
      this.#start = 0
      this.#end = length
    }
    this.#buffer.set(bytes, this.#end)
    this.#end += bytes.length
  }

  async #pump(): Promise<void> {
    if (this.#pumping) return
    this.#pumping = true
    try {
      while (this.#state !== 'closed' && this.#end > this.#start) {
        const progressed =
          this.#state === 'startup' ? this.#readStartup() : this.#state === 'auth' ? this.#readAuth() : await this.#readFrames()
        if (!progressed) break
      }
    } catch (err) {
      this.#host.log(`session ${this.processId}: ${String(err)}`)
      this.#fatal('XX000', `internal error: ${err instanceof Error ? err.message : String(err)}`)
    } finally {
      this.#pumping = false
    }
  }

  #readStartup(): boolean {
    if (this.#end - this.#start < 8) return false
    const length = readInt32(this.#buffer, this.#start)
    if (length < 8 || length > MAX_STARTUP_BYTES) {
      this.#fatal('08P01', `invalid startup packet length ${length}`)
      return false
    }
    if (this.#end - this.#start < length) return false
    const packet = this.#buffer.slice(this.#start, this.#start + length)
    this.#start += length
    const code = readInt32(packet, 4)
    if (code === StartupCode.SSL || code === StartupCode.GSSENC) {
      // No TLS or GSS here: the client goes on in the clear (or gives up).
      this.#transport.write(utf8.encode('N'))
      return true
    }
    if (code === StartupCode.Cancel) {
      this.#host.cancel(readInt32(packet, 8), readInt32(packet, 12))
      this.#close()
      return false
    }
    if (code !== StartupCode.Protocol3) {
      this.#fatal('0A000', `unsupported frontend protocol ${code >>> 16}.${code & 0xffff}: server supports 3.0`)
      return false
    }
    const params = readStartupParams(packet)
    this.#user = params.get('user') ?? 'postgres'
    const database = params.get('database') || this.#user
    this.#host.log(`session ${this.processId}: startup user=${this.#user} database=${database}`)
    void this.#attach(database, params.get('application_name') ?? '')
    return false
  }

  async #attach(database: string, applicationName: string): Promise<void> {
    try {
      this.#mux = await this.#host.database(database)
    } catch (err) {
      this.#fatal('3D000', `database "${database}" is not available: ${err instanceof Error ? err.message : String(err)}`)
      return
    }
    if (this.#state === 'closed') return
    if (this.#host.password !== undefined) {
      this.#auth = new Authenticator(this.#host.authMethod, this.#host.password, this.#user)
      this.#state = 'auth'
      this.#transport.write(this.#auth.begin())
    } else {
      this.#ready(applicationName)
    }
    void this.#pump()
  }

  #ready(applicationName = ''): void {
    this.#state = 'ready'
    const status: [string, string][] = [
      ['application_name', applicationName],
      ['client_encoding', 'UTF8'],
      ['DateStyle', 'ISO, MDY'],
      ['default_transaction_read_only', 'off'],
      ['in_hot_standby', 'off'],
      ['integer_datetimes', 'on'],
      ['IntervalStyle', 'postgres'],
      ['is_superuser', 'on'],
      ['scram_iterations', '4096'],
      ['server_encoding', 'UTF8'],
      ['server_version', this.#host.serverVersion],
      ['session_authorization', this.#user],
      ['standard_conforming_strings', 'on'],
      ['TimeZone', 'UTC'],
    ]
    this.#transport.write(
      concat([
        authenticationOk(),
        ...status.map(([k, v]) => parameterStatus(k, v)),
        backendKeyData(this.processId, this.secret),
        readyForQuery('I'),
      ]),
    )
  }

  #readAuth(): boolean {
    const frameBytes = this.#nextFrame()
    if (!frameBytes) return false
    if (frameBytes[0] !== Msg.Password) {
      this.#fatal('08P01', `expected a password message, got type 0x${frameBytes[0]!.toString(16)}`)
      return false
    }
    const step = this.#auth!.step(frameBytes.subarray(5))
    if (step.reply) this.#transport.write(step.reply)
    if (!step.done) return true
    if (!step.ok) {
      this.#fatal('28P01', `password authentication failed for user "${this.#user}"`)
      return false
    }
    this.#ready()
    return true
  }

  /** The next whole frame, or undefined while it is incomplete; rejects bad framing. */
  #nextFrame(): Uint8Array | undefined {
    const available = this.#end - this.#start
    if (available < 5) return undefined
    const type = this.#buffer[this.#start]!
    const length = readInt32(this.#buffer, this.#start + 1) >>> 0
    if (length < 4) {
      this.#fatal('08P01', `invalid message length ${length}`)
      return undefined
    }
    if (length > this.#host.maxMessageBytes) {
      this.#fatal('08P01', `message of ${length} bytes is over the ${this.#host.maxMessageBytes}-byte limit`)
      return undefined
    }
    if (this.#state === 'ready' && !CLIENT_TYPES.has(type)) {
      this.#fatal('08P01', `invalid frontend message type ${type}`)
      return undefined
    }
    if (available < 1 + length) return undefined
    const out = this.#buffer.slice(this.#start, this.#start + 1 + length)
    this.#start += 1 + length
    return out
  }

  async #readFrames(): Promise<boolean> {
    this.#clearSyncTimer()
    const batch: Uint8Array[] = []
    let terminate = false
    let copyQuery: Uint8Array | undefined
    let rejectCopy = false
    const dropped: string[] = []
    let listenChanged = false
    for (;;) {
      const f = this.#nextFrame()
      if (!f) break
      const type = f[0]!
      if (this.#copy) {
        this.#copy.push(f)
        if (type === Msg.CopyDone || type === Msg.CopyFail) {
          batch.push(...this.#copy)
          this.#copy = undefined
          this.#splitter.dropCopyIn = true
        }
        continue
      }
      if (type === Msg.Terminate) {
        terminate = true
        break
      }
      if (this.#skipToSync) {
        // After our own error in an extended sequence, as Postgres would: skip to Sync.
        if (type === Msg.Sync) {
          this.#skipToSync = false
          this.#unsynced = false
          this.#transport.write(readyForQuery(this.#inTransaction ? 'T' : 'I'))
        }
        continue
      }
      if (type === Msg.Query || type === Msg.Parse) {
        const sql = this.#sqlOf(f)
        const changes = findListenChanges(sql)
        if (changes) {
          listenChanged = true
          this.#applyListen(changes)
        }
        if (discardsListens(sql)) listenChanged = true
        if (type === Msg.Parse && isCopyFromStdin(sql)) {
          // The engine cannot wait for COPY data in the middle of an extended
          // sequence (it would fail the COPY and lose the Sync): refuse it here.
          rejectCopy = true
          break
        }
        const drop = droppedDatabase(sql)
        if (drop) dropped.push(drop)
        if (type === Msg.Query && isCopyFromStdin(sql)) {
          // The engine cannot wait for data: answer CopyInResponse ourselves,
          // gather the data, then run COPY with it in one exec.
          copyQuery = f
          break
        }
      }
      if (EXTENDED_TYPES.has(type)) this.#unsynced = true
      else if (type === Msg.Sync || type === Msg.Query) this.#unsynced = false
      batch.push(EXTENDED_TYPES.has(type) ? this.#renamer.rewrite(type, f) : f)
    }
    // A framing error above closed the session: what came before it does not run.
    if (batch.length > 0 && this.#state !== 'closed') await this.#runBatch(concat(batch), listenChanged)
    if (rejectCopy) {
      this.#skipToSync = true
      this.#transport.write(
        errorResponse('0A000', 'COPY FROM STDIN is not supported in the extended query protocol here; send it as a simple Query'),
      )
    }
    if (copyQuery) {
      this.#copy = [copyQuery]
      this.#transport.write(copyInResponse())
    }
    for (const name of dropped) this.#host.dropped(name)
    if (terminate) {
      this.#close()
      return false
    }
    if (this.#unsynced && this.#state === 'ready') this.#armSyncTimer()
    return batch.length > 0 || copyQuery !== undefined || rejectCopy
  }

  #sqlOf(f: Uint8Array): string {
    if (f[0] === Msg.Query) return decodeUtf8(f.subarray(5, f.length - 1))
    const [, afterName] = readCString(f, 5, f.length)
    return readCString(f, afterName, f.length)[0]
  }

  #applyListen(changes: NonNullable<ReturnType<typeof findListenChanges>>): void {
    const mux = this.#mux!
    for (const ch of changes.listen) {
      this.#channels.add(ch)
      mux.listen(this, ch)
    }
    const removed = changes.unlistenAll ? [...this.#channels] : changes.unlisten
    for (const ch of removed) {
      this.#channels.delete(ch)
      mux.unlisten(this, ch)
    }
  }

  async #runBatch(message: Uint8Array, listenChanged: boolean): Promise<void> {
    const mux = this.#mux!
    const splitter = this.#splitter
    await mux.run(this, (lease) => {
      // Closed while waiting for the engine: the cleanup owns what is left.
      if (this.#state === 'closed') return
      splitter.lastStatus = 0
      const write = (bytes: Uint8Array): void => {
        splitter.push(bytes)
        if (splitter.pendingBytes > 262_144) this.#flush()
      }
      try {
        lease.execProtocolRawStream(message, write)
        // An UNLISTEN by this client must not end another client's LISTEN.
        if (listenChanged) this.#relisten(lease)
      } catch (err) {
        this.#flush()
        this.#fatal('XX000', `the database failed: ${err instanceof Error ? err.message : String(err)}`)
        throw err
      }
      if (splitter.lastStatus !== 0) this.#inTransaction = splitter.lastStatus !== 0x49 /* I */
      this.#flush()
    })
  }

  #relisten(lease: EngineLease): void {
    const channels = [...new Set([...this.#mux!.channels.keys(), ...lease.listeningChannels])]
    if (channels.length === 0) return
    const sql = channels.map((c) => `LISTEN ${quoteChannel(c)}`).join(';')
    lease.execProtocolRawStream(frame(Msg.Query, cstrings(sql)), () => {})
  }

  #flush(): void {
    const out = this.#splitter.take()
    if (out && this.#state !== 'closed') this.#transport.write(out)
  }



  #armSyncTimer(): void {
    this.#clearSyncTimer()
    const ms = this.#host.syncTimeoutMs
    if (ms <= 0) return
    this.#syncTimer = setTimeout(() => {
      this.#fatal('08P01', `no Sync within ${ms} ms after an extended-protocol message; the session was rolled back`)
    }, ms)
    this.#syncTimer.unref?.()
  }

  #clearSyncTimer(): void {
    if (this.#syncTimer) clearTimeout(this.#syncTimer)
    this.#syncTimer = undefined
  }

  #fatal(code: string, message: string): void {
    if (this.#state === 'closed') return
    this.#transport.write(errorResponse(code, message, 'FATAL'))
    this.#close()
  }

  /** The connection ended or must end: give the engine back clean. */
  #close(): void {
    if (this.#state === 'closed') return
    this.#state = 'closed'
    this.#clearSyncTimer()
    this.#transport.end()
    void this.cleanup()
  }

  /** Called by the transport when the peer went away. */
  disconnected(): void {
    this.#close()
  }

  /**
   * Rolls back an open transaction, closes this client's prepared statements
   * and LISTENs no one else needs, then releases the engine.
   */
  cleanup(): Promise<void> {
    this.#cleanedUp ??= this.#cleanupOnce()
    return this.#cleanedUp
  }

  async #cleanupOnce(): Promise<void> {
    const mux = this.#mux
    if (!mux) return
    const orphanChannels = [...this.#channels].filter((ch) => mux.unlisten(this, ch))
    mux.forget(this)
    try {
      await mux.run(this, (lease) => {
        // Decided with the engine in hand: a batch that finished just before
        // may have opened a transaction.
        const statements = [...this.#renamer.statements]
        const frames: Uint8Array[] = []
        if (this.#unsynced) frames.push(SYNC)
        for (const name of statements) frames.push(frame(Msg.Close, concat([utf8.encode('S'), cstrings(name)])))
        if (statements.length > 0) frames.push(SYNC)
        const sql = [
          ...(this.#inTransaction || this.#unsynced || lease.inTransaction ? ['ROLLBACK'] : []),
          ...orphanChannels.map((c) => `UNLISTEN ${quoteChannel(c)}`),
        ]
        if (sql.length > 0) frames.push(frame(Msg.Query, cstrings(sql.join(';'))))
        this.#inTransaction = false
        this.#unsynced = false
        if (frames.length > 0) lease.execProtocolRawStream(concat(frames), () => {})
      })
    } catch (err) {
      this.#host.log(`session ${this.processId}: cleanup failed: ${String(err)}`)
    } finally {
      mux.release(this)
    }
  }
}
