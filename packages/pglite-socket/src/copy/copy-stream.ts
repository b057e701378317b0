import { Frontend } from '@pgwasm/pglite/protocol'
import type { ProtocolError } from '@pgwasm/pglite'
import { FrameReader } from '../wire/frame-reader.js'
import { PEER_LEFT } from '../wire/socket-now.js'
import { copyFail, unexpectedDuringCopy } from '../wire/wire.js'

/** Reads what the client's socket holds now: bytes read, 0 for none yet, or PEER_LEFT. */
export type ReadNow = (into: Uint8Array) => number

/** How a streamed COPY's data ended, when it did not end with the client's CopyDone or CopyFail. */
export type CopyStreamEnd =
  /** The client's CopyDone or CopyFail went to the engine. */
  | { readonly kind: 'data' }
  /** A message that may not come during COPY, or a malformed frame: the connection ends. */
  | { readonly kind: 'protocol'; readonly type: number | undefined; readonly error: ProtocolError | undefined }
  /** The client closed its side. */
  | { readonly kind: 'left' }
  /** No data came for `stallMs`, a CancelRequest came, or the request ran out of time: the COPY failed. */
  | { readonly kind: 'stalled' | 'stopped' | 'timeout' }

export interface CopyStreamLimits {
  readonly maxMessageBytes: number
  /** The longest the stream waits for data before it fails the COPY. */
  readonly stallMs: number
  /** `performance.now()` past which the COPY fails as its request ran out of time (Infinity: never). */
  readonly deadline: number
  /** Whether the client canceled the COPY. */
  readonly stop: () => boolean
}

/** The engine gets COPY data in pieces of about this much, so it starts on the first ones while the rest arrive. */
const PIECE_BYTES = 1024 * 1024
/** Room the receive buffer keeps free for one read. */
const READ_ROOM = 256 * 1024
const sleeper = new Int32Array(new SharedArrayBuffer(4))

/**
 * The data of one COPY FROM STDIN as the engine reads it: whole CopyData
 * frames from the client's socket, read synchronously while the engine
 * waits for them (no socket event can come while it runs), up to and
 * including the client's CopyDone or CopyFail. Without it the server held
 * a COPY's data until CopyDone and the engine then took it in one piece:
 * 1 GB more memory for a 1 GB load, and the upload and the load one after
 * the other. While the stream is read the engine is this client's, so a
 * client whose data stops for `stallMs` has its COPY failed (57014) rather
 * than holding every other client up. Flush and Sync are dropped, as
 * Postgres ignores them during COPY; any other message, or a malformed
 * frame, fails the COPY and ends the stream ({@link end}).
 */
export class CopyStream {
  readonly #input: FrameReader
  readonly #read: ReadNow
  readonly #limits: CopyStreamLimits
  #end: CopyStreamEnd | undefined

  /** `buffered`: what the client sent after the last frame taken, in order, read before the socket. */
  constructor(buffered: readonly Uint8Array[], read: ReadNow, limits: CopyStreamLimits) {
    this.#input = new FrameReader(limits.maxMessageBytes)
    for (const bytes of buffered) this.#input.append(bytes)
    this.#read = read
    this.#limits = limits
  }

  /** How the data ended; undefined while the engine has not had all of it (the COPY failed first). */
  get end(): CopyStreamEnd | undefined {
    return this.#end
  }

  /** Bytes read past the COPY's data: the client's next messages. */
  rest(): Uint8Array {
    const input = this.#input
    return input.bytes.slice(input.offset, input.offset + input.buffered)
  }

  /**
   * The next whole CopyData frames (a view, valid until the next call),
   * ending with the CopyDone or CopyFail that ends the data; a CopyFail of
   * ours when the data cannot go on; undefined after the end.
   */
  readonly next = (): Uint8Array | undefined => {
    if (this.#end) return undefined
    let quietSince: number | undefined
    for (;;) {
      const frames = this.#frames()
      if (frames) return frames
      // #frames may have set it (narrowing does not see that).
      const end = this.#end as CopyStreamEnd | undefined
      if (end) return end.kind === 'data' ? undefined : copyFail(failReason(end, this.#limits.stallMs))
      const read = this.#input.readInto(this.#read, READ_ROOM)
      if (read > 0) {
        quietSince = undefined
        continue
      }
      if (read === PEER_LEFT) {
        this.#end = { kind: 'left' }
        continue
      }
      const now = performance.now()
      quietSince ??= now
      if (this.#limits.stop()) this.#end = { kind: 'stopped' }
      else if (now >= this.#limits.deadline) this.#end = { kind: 'timeout' }
      else if (now - quietSince >= this.#limits.stallMs) this.#end = { kind: 'stalled' }
      else Atomics.wait(sleeper, 0, 0, 1)
    }
  }

  /** Takes the whole frames buffered, up to {@link PIECE_BYTES}, or notes why the data ended. */
  #frames(): Uint8Array | undefined {
    const input = this.#input
    let start = input.offset
    let taken = 0
    while (taken < PIECE_BYTES) {
      let size: number
      try {
        size = input.peekFrame(true)
      } catch (err) {
        // After the frames before it: the next call finds it again.
        if (taken === 0) this.#end = { kind: 'protocol', type: undefined, error: err as ProtocolError }
        break
      }
      if (size === 0) break
      const type = input.bytes[input.offset]!
      if (type === Frontend.CopyData || type === Frontend.CopyDone || type === Frontend.CopyFail) {
        input.skip(size)
        taken += size
        if (type === Frontend.CopyData) continue
        this.#end = { kind: 'data' }
        break
      }
      if (taken > 0) break
      if (type === Frontend.Flush || type === Frontend.Sync) {
        input.skip(size)
        start += size
        continue
      }
      this.#end = { kind: 'protocol', type, error: undefined }
      break
    }
    return taken > 0 ? input.bytes.subarray(start, start + taken) : undefined
  }
}

function failReason(end: Exclude<CopyStreamEnd, { kind: 'data' }>, stallMs: number): string {
  switch (end.kind) {
    case 'protocol':
      return end.error ? end.error.message : unexpectedDuringCopy(end.type!)
    case 'left':
      return 'the client closed the connection'
    case 'stalled':
      return `no COPY data for ${stallMs} ms while the COPY held the engine (the server's copyStallMs)`
    case 'stopped':
      return 'canceling statement due to user request'
    case 'timeout':
      return "canceling statement: it ran longer than the server's maxStatementMs"
  }
}
