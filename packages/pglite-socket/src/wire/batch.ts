import type { FrameReader } from './frame-reader.js'
import { concat, copyOut } from './wire.js'

/**
 * The frames of one exec, gathered from a session's input. Frames that go
 * to the engine unchanged are passed over in place and copied out in one
 * piece when the run ends; only rewritten frames are copied one by one.
 */
export class BatchBuilder {
  readonly #input: FrameReader
  readonly #pieces: Uint8Array[] = []
  #runStart = -1
  #runEnd = -1

  constructor(input: FrameReader) {
    this.#input = input
  }

  get isEmpty(): boolean {
    return this.#pieces.length === 0 && this.#runStart < 0
  }

  /** Takes the `size`-byte frame at the input's offset as it is. */
  passOver(size: number): void {
    const at = this.#input.offset
    if (this.#runStart < 0) this.#runStart = at
    this.#runEnd = at + size
    this.#input.skip(size)
  }

  /** Adds a frame of its own (a rewritten one). */
  add(frame: Uint8Array): void {
    this.#endRun()
    this.#pieces.push(frame)
  }

  /**
   * The gathered bytes, and starts a new batch. Call it before any await:
   * the passed-over frames live in the input buffer, which the next bytes
   * from the client may move.
   */
  take(): Uint8Array {
    this.#endRun()
    const pieces = this.#pieces
    const out = pieces.length === 1 ? pieces[0]! : concat(pieces)
    pieces.length = 0
    return out
  }

  #endRun(): void {
    if (this.#runStart < 0) return
    this.#pieces.push(copyOut(this.#input.bytes, this.#runStart, this.#runEnd))
    this.#runStart = -1
  }
}
