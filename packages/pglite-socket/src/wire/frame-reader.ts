import { ProtocolError, maxFrontendMessageBytes } from '@pgwasm/pglite'
import { CLIENT_TYPES, copyOut, readInt32 } from './wire.js'

/** A startup packet may not be longer (postgres.c's MAX_STARTUP_PACKET_LENGTH). */
const MAX_STARTUP_BYTES = 10_000
/** The buffer a reader starts with, and goes back to once a larger message it grew for is read. */
const INITIAL_BYTES = 16384
/** Past this a buffer grows by a quarter at a time, not twice. */
const LARGE_BYTES = 64 * 1024 * 1024

/**
 * One client's receive buffer: bytes are appended as they arrive and whole
 * startup packets or frames are taken off the front. One buffer reused
 * through cursors, grown only for a larger message. A length field is
 * checked as soon as its header is in, so a client cannot make the server
 * buffer a body it would refuse.
 */
export class FrameReader {
  #buffer = new Uint8Array(INITIAL_BYTES)
  #start = 0
  #end = 0
  readonly #maxMessageBytes: number

  /** `maxMessageBytes` caps every message below the per-type limits. */
  constructor(maxMessageBytes: number) {
    this.#maxMessageBytes = maxMessageBytes
  }

  get buffered(): number {
    return this.#end - this.#start
  }

  append(bytes: Uint8Array): void {
    this.#makeRoom(bytes.length)
    this.#buffer.set(bytes, this.#end)
    this.#end += bytes.length
  }

  /**
   * Reads into the buffer's free room with `read` (which returns how many
   * bytes it put there, or 0 or less for none), making room first: the
   * unread bytes move to the front, and the buffer grows to hold at least
   * `room` more. Views of the buffer taken before are no longer valid.
   * @returns what `read` returned.
   */
  readInto(read: (into: Uint8Array) => number, room: number): number {
    this.#makeRoom(room)
    const n = read(this.#buffer.subarray(this.#end))
    if (n > 0) this.#end += n
    return n
  }

  /** Makes `room` free bytes after the unread ones: they move to the front, or to a larger buffer. */
  #makeRoom(room: number): void {
    if (this.#end + room <= this.#buffer.length) return
    const length = this.#end - this.#start
    if (length + room <= this.#buffer.length) {
      this.#buffer.copyWithin(0, this.#start, this.#end)
    } else {
      // Doubling, then by a quarter past 64 MiB (a 300 MB message must not take 512 MB), but
      // never past the frame that is arriving: its length says how much is to come.
      const frame = length >= 5 ? 1 + (readInt32(this.#buffer, this.#start + 1) >>> 0) : Infinity
      const step = this.#buffer.length < LARGE_BYTES ? this.#buffer.length * 2 : Math.ceil(this.#buffer.length * 1.25)
      const grown = new Uint8Array(Math.max(length + room, Math.min(step, frame)))
      grown.set(this.#buffer.subarray(this.#start, this.#end))
      this.#buffer = grown
    }
    this.#start = 0
    this.#end = length
  }

  /**
   * The next startup-phase packet (length, then code), or undefined while incomplete.
   * @throws {ProtocolError} `BAD_FRAME` for a length outside 8..10000.
   */
  startupPacket(): Uint8Array | undefined {
    if (this.#end - this.#start < 8) return undefined
    const length = readInt32(this.#buffer, this.#start)
    if (length < 8 || length > MAX_STARTUP_BYTES) {
      throw new ProtocolError(`invalid startup packet length ${length}`, { code: 'BAD_FRAME' })
    }
    return this.#take(length)
  }

  /**
   * The next whole frame (type, length, body), copied out, or undefined while it is incomplete.
   * @param afterStartup whether only the message types a client may send after startup are allowed.
   * @throws {ProtocolError} `UNKNOWN_MESSAGE` for another type; `BAD_FRAME` for a length below 4 or over its type's limit.
   */
  frame(afterStartup: boolean): Uint8Array | undefined {
    const size = this.peekFrame(afterStartup)
    return size === 0 ? undefined : this.#take(size)
  }

  /**
   * Checks the next frame's header and says how many bytes the whole frame
   * takes (0 while it is incomplete), leaving it in place at {@link offset}
   * of {@link bytes} for the caller to read, then {@link skip} or {@link take}.
   * @throws {ProtocolError} as {@link frame} does.
   */
  peekFrame(afterStartup: boolean): number {
    const start = this.#start
    if (this.#end - start < 5) return 0
    const buffer = this.#buffer
    const type = buffer[start]!
    if (afterStartup && !CLIENT_TYPES.has(type)) {
      throw new ProtocolError(`invalid frontend message type ${type}`, { code: 'UNKNOWN_MESSAGE' })
    }
    const length = readInt32(buffer, start + 1) >>> 0
    if (length < 4) throw new ProtocolError(`invalid message length ${length}`, { code: 'BAD_FRAME' })
    const limit = Math.min(maxFrontendMessageBytes(type), this.#maxMessageBytes)
    if (length > limit) {
      throw new ProtocolError(`invalid message length ${length}: a ${typeName(type)} message may have at most ${limit} bytes`, {
        code: 'BAD_FRAME',
      })
    }
    return this.#end - start > length ? 1 + length : 0
  }

  /**
   * The receive buffer. Views into it stay valid only until the next
   * {@link append}, which may move or replace it.
   */
  get bytes(): Uint8Array {
    return this.#buffer
  }

  /** Where the next unread byte is in {@link bytes}. */
  get offset(): number {
    return this.#start
  }

  /** Passes over `length` bytes the caller has read in place. */
  skip(length: number): void {
    this.#start += length
  }

  /** The next `length` bytes, copied out. */
  take(length: number): Uint8Array {
    const out = copyOut(this.#buffer, this.#start, this.#start + length)
    this.#start += length
    return out
  }

  /**
   * Drops the buffer for good: the connection is over, and what it sent goes with it.
   * @returns whether the buffer dropped was a large one (worth a collection).
   */
  release(): boolean {
    const dropped = this.#buffer.length
    this.#buffer = new Uint8Array(0)
    this.#start = 0
    this.#end = 0
    return dropped >= LARGE_BYTES
  }

  /**
   * Gives back a buffer grown for a large message once little of it is
   * unread: one client's largest message must not stay held. Only where no
   * view of the buffer is kept (not while a batch is being gathered).
   * @returns whether the buffer dropped was a large one (worth a collection).
   */
  trim(): boolean {
    const length = this.#end - this.#start
    if (this.#buffer.length <= INITIAL_BYTES || length > INITIAL_BYTES) return false
    const dropped = this.#buffer.length
    const small = new Uint8Array(INITIAL_BYTES)
    small.set(this.#buffer.subarray(this.#start, this.#end))
    this.#buffer = small
    this.#start = 0
    this.#end = length
    return dropped >= LARGE_BYTES
  }

  #take(length: number): Uint8Array | undefined {
    return this.#end - this.#start < length ? undefined : this.take(length)
  }
}

/** `'S'` for a printable type byte, `0x01` for another. */
function typeName(type: number): string {
  return type >= 0x20 && type < 0x7f ? `'${String.fromCharCode(type)}'` : `0x${type.toString(16).padStart(2, '0')}`
}
