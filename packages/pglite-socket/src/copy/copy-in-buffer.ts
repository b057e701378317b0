/**
 * One COPY FROM STDIN request as it arrives: the COPY statement's Query
 * frame, then each CopyData frame copied in once from the socket's buffer,
 * then CopyDone or CopyFail; the engine takes it whole. Kept as a list of
 * frames and joined at CopyDone, a 1 GB load was copied twice more and left
 * a million small buffers to collect.
 */
export class CopyInBuffer {
  #bytes: Uint8Array
  #length = 0

  /** `head`: the COPY's Query frame; `room`: the most data expected after it (reserved where the runtime can, as address space only). */
  constructor(head: Uint8Array, room: number) {
    const initial = Math.max(64 * 1024, head.length)
    this.#bytes = reserve(initial, head.length + room)
    this.append(head)
  }

  append(frame: Uint8Array): void {
    const needed = this.#length + frame.length
    if (needed > this.#bytes.length) this.#grow(needed)
    this.#bytes.set(frame, this.#length)
    this.#length = needed
  }

  /** The request so far; a view, valid until the next append. */
  get bytes(): Uint8Array {
    return this.#bytes.subarray(0, this.#length)
  }

  #grow(needed: number): void {
    const buffer = this.#bytes.buffer as ResizableBuffer
    const size = Math.max(needed, this.#bytes.length * 2)
    if (buffer.resizable === true && needed <= buffer.maxByteLength) {
      buffer.resize(Math.min(size, buffer.maxByteLength))
      return
    }
    const next = new Uint8Array(size)
    next.set(this.#bytes.subarray(0, this.#length))
    this.#bytes = next
  }
}

type ResizableBuffer = ArrayBuffer & { readonly resizable?: boolean; readonly maxByteLength: number; resize(length: number): void }
type ResizableBufferConstructor = new (length: number, options: { maxByteLength: number }) => ResizableBuffer

/** A length-tracking view of a buffer that can grow to `max` in place; a plain array where the runtime refuses one. */
function reserve(initial: number, max: number): Uint8Array {
  try {
    return new Uint8Array(new (ArrayBuffer as unknown as ResizableBufferConstructor)(initial, { maxByteLength: Math.max(initial, max) }))
  } catch {
    return new Uint8Array(initial)
  }
}
