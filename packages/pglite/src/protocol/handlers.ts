import { FrameScanner, type FrameSink } from './frames.js'
import { Backend } from '../engine/wire/message-codes.js'
import { readNotification, type Notification } from './messages.js'

/** What the engine's write callback forwards every chunk to during one exec. */
export interface ProtocolHandler {
  /** `bytes` is a view into WASM memory, valid only during the call. */
  onChunk(bytes: Uint8Array): void
  /** Called once the exec has ended. */
  finish(): void
}

/**
 * parsed: every frame decoded by a sink (results, notices, notifications,
 * the first error). Used by query, exec, execProtocol, execProtocolStream.
 */
export class ParsedHandler implements ProtocolHandler {
  readonly #scanner: FrameScanner
  #failed = false
  #failure: unknown
  constructor(sink: FrameSink) {
    this.#scanner = new FrameScanner(sink)
  }
  onChunk(bytes: Uint8Array): void {
    if (this.#failed) return
    // An exception thrown into the engine (a caller's parser that throws)
    // would end it: keep it for the caller, and skip the rest of the output.
    try {
      this.#scanner.push(bytes)
    } catch (err) {
      this.#failed = true
      this.#failure = err
    }
  }
  finish(): void {
    this.#scanner.reset()
  }
  /** What the sink threw during the exec, once (undefined when nothing did). */
  takeFailure(): unknown {
    const failure = this.#failure
    this.#failed = false
    this.#failure = undefined
    return failure
  }
  get assemblyBytes(): number {
    return this.#scanner.assemblyBytes
  }
}

/** raw: bytes go to the caller untouched; nothing parsed, nothing kept. */
export class RawHandler implements ProtocolHandler {
  #onData: (bytes: Uint8Array) => void = () => {}
  arm(onData: (bytes: Uint8Array) => void): this {
    this.#onData = onData
    return this
  }
  onChunk(bytes: Uint8Array): void {
    this.#onData(bytes)
  }
  finish(): void {
    this.#onData = () => {}
  }
}

/**
 * raw + notify: bytes go to the caller untouched, and a scanner reads frame
 * headers only, decoding just NotificationResponse frames, so a NOTIFY is
 * never lost because of the mode it arrived in.
 */
export class RawNotifyHandler implements ProtocolHandler, FrameSink {
  #onData: (bytes: Uint8Array) => void = () => {}
  readonly #scanner = new FrameScanner(this, (type) => type === Backend.NotificationResponse)
  notifications: Notification[] | undefined

  arm(onData: (bytes: Uint8Array) => void): this {
    this.#onData = onData
    this.notifications = undefined
    return this
  }
  onChunk(bytes: Uint8Array): void {
    this.#onData(bytes)
    this.#scanner.push(bytes)
  }
  onFrame(_type: number, buf: Uint8Array, start: number, end: number): void {
    ;(this.notifications ??= []).push(readNotification(buf, start, end))
  }
  finish(): void {
    this.#onData = () => {}
    this.#scanner.reset()
  }
  get assemblyBytes(): number {
    return this.#scanner.assemblyBytes
  }
}

/**
 * Gathers raw output into one growable buffer for `execProtocolRaw`, which
 * must return all of it. Shrinks back after a large reply.
 */
export class RawAccumulator {
  #buf = new Uint8Array(16384)
  #length = 0
  readonly push = (bytes: Uint8Array): void => {
    const needed = this.#length + bytes.byteLength
    if (needed > this.#buf.byteLength) {
      const grown = new Uint8Array(Math.max(needed, this.#buf.byteLength * 2))
      grown.set(this.#buf.subarray(0, this.#length))
      this.#buf = grown
    }
    this.#buf.set(bytes, this.#length)
    this.#length = needed
  }
  /** A copy of what was gathered; the buffer is then reset for reuse. */
  take(): Uint8Array {
    const out = this.#buf.slice(0, this.#length)
    this.#length = 0
    if (this.#buf.byteLength > 1 << 20) this.#buf = new Uint8Array(16384)
    return out
  }
  get capacityBytes(): number {
    return this.#buf.byteLength
  }
}
