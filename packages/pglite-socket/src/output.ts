import { Msg } from './wire.js'

/**
 * Filters the engine's output for the client that ran the request:
 * NotificationResponse frames are dropped (the multiplexer routes them to the
 * clients that LISTEN, not to whoever ran the NOTIFY), and so is a
 * CopyInResponse the server already sent itself. Runs of forwarded frames are
 * copied out in one piece; frame bodies are never looked into.
 */
export class OutputSplitter {
  #out = new Uint8Array(65536)
  #outLength = 0
  readonly #header = new Uint8Array(5)
  #headerFill = 0
  #remaining = 0
  #type = 0
  #mode: 'forward' | 'drop' = 'forward'
  /** Status byte of the last ReadyForQuery seen (I, T, E), or 0. */
  lastStatus = 0
  /** Drop the next CopyInResponse (the server answered the client already). */
  dropCopyIn = false

  /** Bytes ready to write to the client, and resets the buffer. */
  take(): Uint8Array | undefined {
    if (this.#outLength === 0) return undefined
    const out = this.#out.slice(0, this.#outLength)
    this.#outLength = 0
    if (this.#out.length > 1 << 20) this.#out = new Uint8Array(65536)
    return out
  }

  get pendingBytes(): number {
    return this.#outLength
  }

  push(chunk: Uint8Array): void {
    const n = chunk.length
    let i = 0
    let runStart = -1
    while (i < n) {
      if (this.#remaining === 0 && this.#headerFill === 0 && n - i >= 5) {
        const type = chunk[i]!
        const length = ((chunk[i + 1]! << 24) | (chunk[i + 2]! << 16) | (chunk[i + 3]! << 8) | chunk[i + 4]!) >>> 0
        const mode = this.#modeFor(type)
        if (mode === 'forward') {
          // Extend the run of forwarded frames; copy it out in one piece later.
          if (runStart < 0) runStart = i
          const end = i + 1 + length
          if (end <= n) {
            if (type === Msg.ReadyForQuery) this.lastStatus = chunk[end - 1]!
            i = end
            continue
          }
          this.#type = type
          this.#mode = 'forward'
          this.#remaining = end - n
          i = n
          continue
        }
        if (runStart >= 0) this.#append(chunk.subarray(runStart, i))
        runStart = -1
        this.#header.set(chunk.subarray(i, i + 5))
        i += 5
        this.#begin(type, mode, length - 4)
        continue
      }
      if (runStart >= 0) {
        this.#append(chunk.subarray(runStart, i))
        runStart = -1
      }
      if (this.#remaining > 0) {
        const take = Math.min(this.#remaining, n - i)
        const piece = chunk.subarray(i, i + take)
        if (this.#mode === 'forward') this.#append(piece)
        this.#remaining -= take
        i += take
        if (this.#remaining === 0) {
          if (this.#type === Msg.ReadyForQuery && take > 0) this.lastStatus = piece[take - 1]!
          this.#mode = 'forward'
        }
        continue
      }
      // A header split across chunks.
      this.#header[this.#headerFill++] = chunk[i++]!
      if (this.#headerFill === 5) {
        this.#headerFill = 0
        const type = this.#header[0]!
        const length = ((this.#header[1]! << 24) | (this.#header[2]! << 16) | (this.#header[3]! << 8) | this.#header[4]!) >>> 0
        const mode = this.#modeFor(type)
        if (mode === 'forward') this.#append(this.#header)
        this.#begin(type, mode, length - 4)
      }
    }
    if (runStart >= 0) this.#append(chunk.subarray(runStart, n))
  }

  #modeFor(type: number): 'forward' | 'drop' {
    // Notifications reach clients through the multiplexer's routing, never
    // as part of whichever client's output they happened to appear in.
    if (type === Msg.Notification) return 'drop'
    if (type === Msg.CopyInResponse && this.dropCopyIn) {
      this.dropCopyIn = false
      return 'drop'
    }
    return 'forward'
  }

  #begin(type: number, mode: 'forward' | 'drop', bodyLength: number): void {
    this.#type = type
    this.#mode = bodyLength === 0 ? 'forward' : mode
    this.#remaining = bodyLength
  }

  #append(bytes: Uint8Array): void {
    const needed = this.#outLength + bytes.length
    if (needed > this.#out.length) {
      const grown = new Uint8Array(Math.max(needed, this.#out.length * 2))
      grown.set(this.#out.subarray(0, this.#outLength))
      this.#out = grown
    }
    this.#out.set(bytes, this.#outLength)
    this.#outLength = needed
  }
}
