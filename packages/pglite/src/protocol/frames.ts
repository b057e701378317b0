import { ProtocolError } from '../errors.js'
import { FRAME_HEADER_BYTES as HEADER_BYTES, maxFrontendMessageBytes, uint32At } from '../engine/wire/frontend-frames.js'

/**
 * Receives complete frames. The body is `buf[start, end)`; the 5-byte header
 * sits at `start - 5`. A `buf` is one chunk of output (or one assembled
 * frame): its bytes stay as they are until the next chunk arrives.
 */
export interface FrameSink {
  onFrame(type: number, buf: Uint8Array, start: number, end: number): void
}

const everyType = (): boolean => true

/**
 * Incremental frame scanner over backend output: reads the type byte and
 * length of each frame, correct across chunk boundaries (frames split
 * anywhere). Frames wholly inside a chunk reach the sink as views of that
 * chunk (no copy); only a frame split across chunks is assembled, and only
 * if `wants(type)`; other frames are skipped without looking inside.
 */
export class FrameScanner {
  readonly #sink: FrameSink
  readonly #wants: (type: number) => boolean
  /** Header bytes of a frame whose header was split; then its body, when assembled. */
  #assembly = new Uint8Array(256)
  #headerFill = 0
  #type = 0
  #bodyRemaining = 0
  #bodyFill = 0
  #collecting = false
  #inBody = false

  constructor(sink: FrameSink, wants: (type: number) => boolean = everyType) {
    this.#sink = sink
    this.#wants = wants
  }

  /** True while a frame has started but not ended. */
  get midFrame(): boolean {
    return this.#headerFill > 0 || this.#inBody
  }

  /** Bytes held for assembling split frames (for memory tests). */
  get assemblyBytes(): number {
    return this.#assembly.byteLength
  }

  reset(): void {
    this.#headerFill = 0
    this.#inBody = false
    this.#bodyRemaining = 0
    this.#bodyFill = 0
    this.#collecting = false
    // Give back a buffer a large split frame made grow.
    if (this.#assembly.byteLength > 65536) this.#assembly = new Uint8Array(256)
  }

  push(chunk: Uint8Array): void {
    const n = chunk.length
    let i = 0
    while (i < n) {
      if (this.#inBody) {
        const take = Math.min(this.#bodyRemaining, n - i)
        if (this.#collecting) {
          this.#assembly.set(chunk.subarray(i, i + take), HEADER_BYTES + this.#bodyFill)
          this.#bodyFill += take
        }
        this.#bodyRemaining -= take
        i += take
        if (this.#bodyRemaining === 0) this.#endAssembled()
        continue
      }
      if (this.#headerFill === 0 && n - i >= HEADER_BYTES) {
        const type = chunk[i]!
        const bodyLength = readLength(chunk, i + 1) - 4
        const start = i + HEADER_BYTES
        if (n - start >= bodyLength) {
          if (this.#wants(type)) this.#sink.onFrame(type, chunk, start, start + bodyLength)
          i = start + bodyLength
          continue
        }
        this.#assembly[0] = type
        this.#assembly.set(chunk.subarray(i + 1, start), 1)
        this.#beginBody(type, bodyLength)
        i = start
        continue
      }
      // A header split across chunks: gather its 5 bytes first.
      while (i < n && this.#headerFill < HEADER_BYTES) this.#assembly[this.#headerFill++] = chunk[i++]!
      if (this.#headerFill === HEADER_BYTES) {
        this.#headerFill = 0
        this.#beginBody(this.#assembly[0]!, readLength(this.#assembly, 1) - 4)
      }
    }
  }

  #beginBody(type: number, bodyLength: number): void {
    this.#type = type
    this.#bodyRemaining = bodyLength
    this.#bodyFill = 0
    this.#collecting = this.#wants(type)
    this.#inBody = true
    if (this.#collecting && this.#assembly.byteLength < HEADER_BYTES + bodyLength) {
      const grown = new Uint8Array(Math.max(HEADER_BYTES + bodyLength, this.#assembly.byteLength * 2))
      grown.set(this.#assembly.subarray(0, HEADER_BYTES))
      this.#assembly = grown
    }
    if (bodyLength === 0) this.#endAssembled()
  }

  #endAssembled(): void {
    this.#inBody = false
    if (this.#collecting) {
      this.#collecting = false
      // A view of its own per frame: sinks may cache by buffer identity, and the assembly buffer is reused.
      this.#sink.onFrame(this.#type, this.#assembly.subarray(0, HEADER_BYTES + this.#bodyFill), HEADER_BYTES, HEADER_BYTES + this.#bodyFill)
    }
  }
}

function readLength(buf: Uint8Array, at: number): number {
  const length = uint32At(buf, at)
  if (length < 4 || length > 0x7fffffff) {
    throw new ProtocolError(`frame length ${length} is outside 4..2^31-1`, { code: 'BAD_FRAME' })
  }
  return length
}

/** Frontend messages of the extended protocol, which leave the backend waiting for a Sync. */
const EXTENDED = new Set([0x42 /* B */, 0x43 /* C */, 0x44 /* D */, 0x45 /* E */, 0x48 /* H */, 0x50 /* P */, 0x46 /* F */])

/**
 * Checks that `message` is a sequence of whole frontend frames of known types
 * and lengths Postgres accepts, so that nothing reaches the engine that would
 * make the backend exit.
 * @returns whether the frames end inside an extended-protocol sequence (no Sync after it).
 */
export function validateFrontendFrames(message: Uint8Array, knownTypes: ReadonlySet<number>): boolean {
  let i = 0
  let unsynced = false
  while (i < message.length) {
    if (message.length - i < HEADER_BYTES) {
      throw new ProtocolError(`truncated frame header at byte ${i} of ${message.length}`, { code: 'BAD_FRAME' })
    }
    const type = message[i]!
    if (!knownTypes.has(type)) {
      throw new ProtocolError(`unknown frontend message type 0x${type.toString(16).padStart(2, '0')} at byte ${i}`, {
        code: type === 0x58 /* X */ || type === 0x70 /* p */ ? 'UNEXPECTED_MESSAGE' : 'UNKNOWN_MESSAGE',
      })
    }
    const length = uint32At(message, i + 1)
    if (length < 4) {
      throw new ProtocolError(`frame length ${length} is below the 4-byte minimum (byte ${i})`, { code: 'BAD_FRAME' })
    }
    if (length > maxFrontendMessageBytes(type)) {
      throw new ProtocolError(
        `frame length ${length} of message type '${String.fromCharCode(type)}' is over its ${maxFrontendMessageBytes(type)}-byte limit (byte ${i})`,
        { code: 'BAD_FRAME' },
      )
    }
    if (i + 1 + length > message.length) {
      throw new ProtocolError(
        `frame at byte ${i} claims ${length} bytes but only ${message.length - i - 1} follow`,
        { code: 'BAD_FRAME' },
      )
    }
    if (EXTENDED.has(type)) unsynced = true
    else if (type === 0x53 /* S */) unsynced = false
    i += 1 + length
  }
  return unsynced
}

/**
 * Checks a startup packet (the bytes before any typed frame): its length
 * field matches, it asks for protocol 3.0 and its parameters end properly.
 */
export function validateStartupPacket(packet: Uint8Array): void {
  if (packet.length < 9) throw new ProtocolError(`startup packet of ${packet.length} bytes is too short`, { code: 'BAD_FRAME' })
  const length = uint32At(packet, 0)
  if (length !== packet.length || length > 10000) {
    throw new ProtocolError(`startup packet length field ${length} does not match its ${packet.length} bytes`, { code: 'BAD_FRAME' })
  }
  const code = uint32At(packet, 4)
  if (code !== 196608) {
    throw new ProtocolError(`startup packet asks for protocol code ${code}; only 3.0 (196608) is served`, {
      code: 'UNEXPECTED_MESSAGE',
    })
  }
  if (packet[packet.length - 1] !== 0) {
    throw new ProtocolError('startup packet parameters do not end with a NUL', { code: 'BAD_FRAME' })
  }
}
