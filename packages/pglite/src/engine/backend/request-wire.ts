// One request's bytes as the engine's wire callbacks see them: the frontend
// messages Postgres reads (and the COPY data that follows them), the backend
// messages it writes, and the ReadyForQuery status that ended them.
import { discard, type ProtocolSink } from './backend-types.js'
import type { WireTarget } from './blank-module.js'
import { FrameWriter } from '../wire/frame-writer.js'
import { Backend as BackendMessage } from '../wire/message-codes.js'
import { copyInData } from '../wire/frontend-frames.js'

const COPY_FAIL = new FrameWriter().copyFail('COPY FROM STDIN data must come in the same request as the COPY').view().slice()
const SYNC = new FrameWriter().sync().view().slice()

export class RequestWire implements WireTarget {
  #sink: ProtocolSink = discard
  #input: Uint8Array = new Uint8Array(0)
  #readOffset = 0
  #starved = 0
  /** The request's COPY data ended (CopyDone or CopyFail given): ask the source no more. */
  #copyInEnded = false
  readonly #tail = new Uint8Array(6)
  /** See `Backend.copyInSource`. */
  copyInSource: (() => Uint8Array | undefined) | undefined

  /** @param heap The engine's memory as it is now (a new view after it grows). */
  constructor(private readonly heap: () => Uint8Array) {}

  /** The next request: `message` to read, output to `sink`. */
  begin(message: Uint8Array, sink: ProtocolSink): void {
    this.#sink = sink
    this.#input = message
    this.#readOffset = 0
    this.#starved = 0
    this.#copyInEnded = false
    this.#tail.fill(0)
  }

  /** The request is over: nothing more is read, and output goes nowhere. */
  end(): void {
    this.#sink = discard
    this.#input = new Uint8Array(0)
  }

  /** Whether bytes of the request are left that Postgres has not read into its own buffer. */
  get hasInput(): boolean {
    return this.#readOffset < this.#input.length
  }

  /** Read callback of the engine. */
  onRead(ptr: number, max: number): number {
    if (this.#readOffset >= this.#input.length && !this.#moreCopyIn()) this.#starve()
    const remaining = this.#input.length - this.#readOffset
    const length = remaining < max ? remaining : max
    if (length <= 0) return 0
    this.heap().set(this.#input.subarray(this.#readOffset, this.#readOffset + length), ptr)
    this.#readOffset += length
    return length
  }

  /** Write callback of the engine. */
  onWrite(ptr: number, length: number): number {
    // The heap's view is re-created when memory grows: read it fresh on every call.
    const bytes = this.heap().subarray(ptr, ptr + length)
    this.#sink.onChunk(bytes)
    // Keep the last 6 bytes: a request ends with ReadyForQuery (Z, length 5, status).
    if (length >= 6) this.#tail.set(bytes.subarray(length - 6))
    else {
      this.#tail.copyWithin(0, length)
      this.#tail.set(bytes, 6 - length)
    }
    return length
  }

  /** See `Backend.lastReadyStatus`. */
  get lastReadyStatus(): number {
    const t = this.#tail
    return t[0] === BackendMessage.ReadyForQuery && t[1] === 0 && t[2] === 0 && t[3] === 0 && t[4] === 5 ? t[5]! : 0
  }

  /**
   * Takes the next COPY data from {@link copyInSource}. Only whole CopyData
   * frames, with at most a CopyDone or CopyFail at the end, reach Postgres:
   * any other message would end the backend that every caller shares.
   * @returns false when there is none (the COPY then fails).
   */
  #moreCopyIn(): boolean {
    const source = this.copyInSource
    if (!source || this.#copyInEnded || this.#starved > 0) return false
    let next: Uint8Array | undefined
    try {
      next = source()
    } catch {
      next = undefined
    }
    const data = next && copyInData(next)
    if (!data) return false
    this.#copyInEnded = data === 'ends'
    this.#input = next!
    this.#readOffset = 0
    return true
  }

  /**
   * Postgres asked for bytes the request does not have: it is inside
   * `COPY ... FROM STDIN` (everything else was checked to be whole frames).
   * Reading EOF there makes the backend exit, so answer with a CopyFail, and
   * with a Sync if an extended-protocol COPY then waits for one.
   */
  #starve(): void {
    this.#starved++
    if (this.#starved === 1) this.#input = COPY_FAIL
    else if (this.#starved === 2) this.#input = SYNC
    else return
    this.#readOffset = 0
  }
}
