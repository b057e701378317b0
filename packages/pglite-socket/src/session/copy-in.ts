import { Frontend } from '@pgwasm/pglite/protocol'
import { CopyInBuffer } from '../copy/copy-in-buffer.js'
import { CopyInScript, type ScriptEngine } from '../copy/copy-script.js'
import { CopyStream } from '../copy/copy-stream.js'
import type { SqlStatement } from '@pgwasm/pglite/sql'
import type { FrameReader } from '../wire/frame-reader.js'
import { concat, copyFail, errorResponse, readyForQuery, statusLetter, unexpectedDuringCopy } from '../wire/wire.js'
import type { SessionHost, Transport } from './session-host.js'

/** A CopyDone or CopyFail frame's size past the data (a CopyFail's reason is ours and short). */
const COPY_END_BYTES = 256
/** COPY data past this much streams into the engine instead of waiting for CopyDone (HostOptions.copyStallMs). */
const STREAM_COPY_AFTER = 1024 * 1024

/** BindComplete, and the NoData and ParameterDescription (no parameters) a Describe of a COPY gets. */
const BIND_COMPLETE = new Uint8Array([0x32 /* 2 */, 0, 0, 0, 4])
const NO_DATA = new Uint8Array([0x6e /* n */, 0, 0, 0, 4])
const NO_PARAMETERS = new Uint8Array([0x74 /* t */, 0, 0, 0, 6, 0, 0])

/** What a session's COPY FROM STDIN needs of it. */
export interface CopyInHost {
  readonly input: FrameReader
  readonly transport: Pick<Transport, 'write' | 'readNow' | 'readNowReady'>
  readonly server: Pick<SessionHost, 'maxCopyBytes' | 'copyStallMs' | 'maxMessageBytes'>
  /** The server's cap on one request of this client. */
  readonly timeLimitMs: number | undefined
  /** The last ReadyForQuery status byte the client was sent. */
  readonly status: number
  isClosed(): boolean
  /** Bytes a peerLeft probe read and the session has not received yet (they come first). */
  takeEarly(): Uint8Array[]
  /** Whether a CancelRequest came for this client while the engine runs. */
  canceled(): boolean
  fatal(code: string, message: string): void
  /** Messages up to the next Sync are skipped, and that Sync answered. */
  skipToSync(): void
  /**
   * Runs one step of `script` with the engine held; `settled` is told, in the
   * engine's turn, whether the script waits for more data.
   */
  runScript(script: CopyInScript, listenChanged: boolean, step: (engine: ScriptEngine) => boolean, settled: (waiting: boolean) => void): Promise<void>
}

/**
 * One client's COPY FROM STDIN: the script waiting for its data, the data
 * gathered so far, streaming a large COPY from the socket, and the
 * extended-protocol COPY answered message by message.
 */
export class SessionCopyIn {
  readonly #host: CopyInHost
  /** A COPY FROM STDIN query waiting for the client's data, and the messages gathered so far. */
  #script: CopyInScript | undefined
  #scriptListens = false
  #copyIn: CopyInBuffer | undefined
  #copyInBytes = 0
  /** The COPY failed for its size: CopyData up to its CopyDone or CopyFail is dropped. */
  #discardingCopy = false
  /** Set while a COPY's data is read from the socket by the engine's turn (copy-stream.ts). */
  #streaming = false
  /**
   * A COPY FROM STDIN sent through the extended protocol (Parse, Bind,
   * Execute; its Sync after CopyDone, or before the data): answered as
   * Postgres answers each message, and run as the simple-protocol COPY is.
   */
  #extendedCopy: { readonly sql: string; readonly statements: readonly SqlStatement[]; executed: boolean } | undefined

  constructor(host: CopyInHost) {
    this.#host = host
  }

  /** A COPY waits for the client's data: every message goes to {@link take}. */
  get waiting(): boolean {
    return this.#script !== undefined
  }

  get streaming(): boolean {
    return this.#streaming
  }

  /** An extended-protocol COPY was parsed and not yet executed: messages go to {@link extendedStep} first. */
  get extendedPending(): boolean {
    return this.#extendedCopy !== undefined && !this.#extendedCopy.executed
  }

  /**
   * Whether a message of `type` is the rest of a COPY that failed for its
   * size, dropped as Postgres drops copy messages after a failed COPY.
   */
  dropsFailedData(type: number): boolean {
    if (!this.#discardingCopy) return false
    if (type === Frontend.CopyData || type === Frontend.CopyDone || type === Frontend.CopyFail) {
      if (type !== Frontend.CopyData) this.#discardingCopy = false
      return true
    }
    this.#discardingCopy = false
    return false
  }

  /** Runs a simple Query's COPY FROM STDIN script up to its wait for data. */
  async start(sql: string, statements: readonly SqlStatement[], listenChanged: boolean): Promise<void> {
    const script = new CopyInScript(sql, statements, this.#host.status)
    await this.#runScript(script, listenChanged, (engine) => script.start(engine))
  }

  /** The Parse of an extended-protocol COPY FROM STDIN: it runs at its Execute. */
  parsed(sql: string, statements: readonly SqlStatement[]): void {
    this.#extendedCopy = { sql, statements, executed: false }
  }

  /**
   * A message in copy-in mode, handled as Postgres's CopyGetData does: Flush
   * and Sync are ignored, CopyDone or CopyFail ends the data, any other
   * message loses protocol sync. (Sent to the engine, that would end its
   * backend.) @returns false when the connection was ended.
   */
  async take(f: Uint8Array): Promise<boolean> {
    const type = f[0]!
    const limits = this.#host.server
    if (type === Frontend.CopyData) {
      this.#copyInBytes += f.length
      if (this.#copyInBytes <= limits.maxCopyBytes) {
        this.#copyRequest().append(f)
        if (this.#copyInBytes >= STREAM_COPY_AFTER && this.#canStreamCopy()) await this.#streamCopy()
        return !this.#host.isClosed()
      }
      // Fail the COPY now rather than hold more of it; the rest of its data is dropped.
      this.#discardingCopy = true
      const reason = `more than ${limits.maxCopyBytes} bytes of COPY data before CopyDone (the server's \`maxCopyBytes\`)`
      const failed = copyFail(reason)
      this.#copyIn = new CopyInBuffer(this.#script!.waitingPiece, failed.length)
      this.#copyIn.append(failed)
      await this.#endCopy()
    } else if (type === Frontend.CopyDone || type === Frontend.CopyFail) {
      this.#copyRequest().append(f)
      await this.#endCopy()
    } else if (type !== Frontend.Flush && type !== Frontend.Sync) {
      this.#protocolLost(type)
      return false
    }
    return true
  }

  /**
   * A message after the Parse of an extended-protocol COPY FROM STDIN and
   * before its Execute, answered as Postgres would. False when it ends the
   * COPY's sequence and goes on as any message.
   */
  async extendedStep(type: number, buffer: Uint8Array, at: number, size: number): Promise<boolean> {
    const copy = this.#extendedCopy!
    const { input, transport } = this.#host
    switch (type) {
      case Frontend.Bind:
        input.skip(size)
        transport.write(BIND_COMPLETE)
        return true
      case Frontend.Describe:
        input.skip(size)
        // A COPY has no parameters and returns no rows.
        transport.write(buffer[at + 5] === 0x53 /* S */ ? concat([NO_PARAMETERS, NO_DATA]) : NO_DATA)
        return true
      case Frontend.Flush:
        input.skip(size)
        return true
      case Frontend.Execute: {
        input.skip(size)
        copy.executed = true
        const script = new CopyInScript(copy.sql, copy.statements, this.#host.status, false)
        await this.#runScript(script, false, (engine) => script.start(engine))
        return true
      }
      case Frontend.Sync:
        // Parsed, never executed: nothing ran.
        input.skip(size)
        this.#extendedCopy = undefined
        transport.write(readyForQuery(statusLetter(this.#host.status)))
        return true
      default:
        // Another statement replaces the unnamed one, as Postgres's would.
        this.#extendedCopy = undefined
        return false
    }
  }

  /** The connection ended: the data it held for the engine goes now. */
  release(): void {
    this.#copyIn = undefined
  }

  /** A message that may not come during COPY: Postgres's error, then the connection ends. */
  #protocolLost(type: number): void {
    this.#host.transport.write(errorResponse('08P01', unexpectedDuringCopy(type)))
    this.#host.fatal('08P01', 'terminating connection because protocol synchronization was lost')
  }

  /** The waiting COPY's request being gathered, begun with its Query frame. */
  #copyRequest(): CopyInBuffer {
    return (this.#copyIn ??= new CopyInBuffer(this.#script!.waitingPiece, this.#host.server.maxCopyBytes + COPY_END_BYTES))
  }

  #canStreamCopy(): boolean {
    const transport = this.#host.transport
    return this.#host.server.copyStallMs > 0 && transport.readNow !== undefined && (transport.readNowReady?.() ?? true)
  }

  /**
   * Runs the waiting COPY with the data so far, the engine reading the rest
   * from the socket as it needs it (copy-stream.ts). What the client sent
   * after the COPY's data goes back to the input, in order.
   */
  async #streamCopy(): Promise<void> {
    const host = this.#host
    const { script, request } = this.#takeWaitingCopy()
    let stream: CopyStream | undefined
    await this.#runScript(script, this.#scriptListens, (engine) => {
      // The engine's turn: all the client sent so far is in the input (or
      // early); the socket is read from here on.
      const input = host.input
      const buffered = [input.take(input.buffered), ...host.takeEarly()]
      stream = new CopyStream(buffered, host.transport.readNow!, {
        maxMessageBytes: host.server.maxMessageBytes,
        stallMs: host.server.copyStallMs,
        deadline: host.timeLimitMs !== undefined ? performance.now() + host.timeLimitMs : Infinity,
        stop: host.canceled,
      })
      // Until its rest is back in the input: a later request of this turn must not read the socket past it (peerLeft).
      this.#streaming = true
      return script.supply(engine, request, stream.next)
    }).finally(() => {
      this.#streaming = false
    })
    if (!stream) return
    host.input.append(stream.rest())
    const end = stream.end
    if (end?.kind === 'protocol') {
      if (end.error) throw end.error
      this.#protocolLost(end.type!)
    } else if (end?.kind !== 'data') {
      // The COPY ended before its data: the rest of it is dropped, as Postgres drops copy messages after a failed COPY.
      this.#discardingCopy = true
    }
  }

  /** The waiting COPY's script and the request gathered for it, no longer the session's. */
  #takeWaitingCopy(): { script: CopyInScript; request: Uint8Array } {
    const script = this.#script!
    const request = this.#copyIn!.bytes
    this.#script = undefined
    this.#copyIn = undefined
    this.#copyInBytes = 0
    return { script, request }
  }

  /** Gives the waiting COPY script its request (data ending with CopyDone or CopyFail). */
  async #endCopy(): Promise<void> {
    const { script, request } = this.#takeWaitingCopy()
    await this.#runScript(script, this.#scriptListens, (engine) => script.supply(engine, request))
  }

  /**
   * One step of a COPY script on the engine (the session's turn); a script
   * that waits for data becomes the waiting one.
   */
  #runScript(script: CopyInScript, listenChanged: boolean, step: (engine: ScriptEngine) => boolean): Promise<void> {
    return this.#host.runScript(script, listenChanged, step, (waiting) => {
      if (waiting) {
        this.#script = script
        this.#scriptListens = listenChanged
      } else if (this.#extendedCopy?.executed) {
        // An extended-protocol COPY is over: its ReadyForQuery answers the
        // next Sync (one sent during the COPY was ignored, as Postgres ignores
        // it: libpq sends another after CopyDone).
        this.#extendedCopy = undefined
        this.#host.skipToSync()
      }
    })
  }
}
