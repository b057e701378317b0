import { Backend } from '@pgwasm/pglite/protocol'
import { copyOut } from './wire.js'

type Mode = 'forward' | 'drop' | 'hold' | 'error'

/** A ReadyForQuery frame: type, length 5, status. */
const READY_FOR_QUERY_BYTES = 6

/** Bytes appended at the end, grown by doubling, reused after `clear()`. */
class ByteBuffer {
  bytes: Uint8Array
  length = 0

  constructor(capacity: number) {
    this.bytes = new Uint8Array(capacity)
  }

  append(data: Uint8Array): void {
    const needed = this.length + data.length
    if (needed > this.bytes.length) {
      const grown = new Uint8Array(Math.max(needed, this.bytes.length * 2))
      grown.set(this.bytes.subarray(0, this.length))
      this.bytes = grown
    }
    this.bytes.set(data, this.length)
    this.length = needed
  }
}

/**
 * Filters the engine's output for the client that ran the request:
 * NotificationResponse frames are dropped (the multiplexer routes them to the
 * clients that LISTEN, not to whoever ran the NOTIFY). For a query string the
 * server runs in several requests (a COPY script) it also drops the
 * CopyInResponse it sent itself and each piece's ReadyForQuery, and can hold
 * back the last CommandComplete. Runs of forwarded frames are copied out in
 * one piece; frame bodies are never looked into.
 */
export class OutputSplitter {
  #out = new ByteBuffer(65536)
  readonly #held = new ByteBuffer(64)
  /** An ErrorResponse being gathered whole for {@link rewriteError}. */
  readonly #error = new ByteBuffer(256)
  readonly #header = new Uint8Array(5)
  #headerFill = 0
  #remaining = 0
  #type = 0
  #mode: Mode = 'forward'
  /** Status byte of the last ReadyForQuery seen (I, T, E), or 0. */
  lastStatus = 0
  /** Drop the next CopyInResponse (the server answered the client already). */
  dropCopyIn = false
  /** Drop ReadyForQuery frames. */
  dropReady = false
  /**
   * Hold each CommandComplete until a frame other than ReadyForQuery
   * follows; the last one stays held until {@link settleHeld}.
   */
  holdComplete = false
  /** Set when an ErrorResponse passes; the caller clears it. */
  errorSeen = false
  /**
   * Set when a frame shows that a later Parse of the same SQL could mean
   * something else (a setting reported by ParameterStatus changed, or a
   * command other than plain DML or transaction control completed); the
   * caller clears it. See UnnamedStatementCache.
   */
  meaningMayChange = false
  /** Rewrites each whole ErrorResponse frame before it goes out (gathered whole first); none: sent as is. */
  rewriteError: ((frame: Uint8Array) => Uint8Array) | undefined

  /** Bytes ready to write to the client, and resets the buffer. */
  take(): Uint8Array | undefined {
    const out = this.#out
    if (out.length === 0) return undefined
    const bytes = copyOut(out.bytes, 0, out.length)
    out.length = 0
    // Give back what one large result made it grow to.
    if (out.bytes.length > 1 << 20) this.#out = new ByteBuffer(65536)
    return bytes
  }

  get pendingBytes(): number {
    return this.#out.length
  }

  /**
   * Puts `frames` before the ReadyForQuery that ends the output not yet
   * taken, as Postgres sends ParameterStatus; after it when that
   * ReadyForQuery went out already.
   */
  beforeReady(frames: Uint8Array): void {
    const out = this.#out
    const at = out.length - READY_FOR_QUERY_BYTES
    if (at < 0 || out.bytes[at] !== Backend.ReadyForQuery || out.bytes[at + 4] !== READY_FOR_QUERY_BYTES - 1) {
      out.append(frames)
      return
    }
    const ready = out.bytes.slice(at, out.length)
    out.length = at
    out.append(frames)
    out.append(ready)
  }

  /** Sends (`send`) or drops the CommandComplete still held back. */
  settleHeld(send: boolean): void {
    const held = this.#held
    if (send && held.length > 0) this.#out.append(held.bytes.subarray(0, held.length))
    held.length = 0
  }

  push(chunk: Uint8Array): void {
    const n = chunk.length
    let i = 0
    let runStart = -1
    while (i < n) {
      if (this.#remaining === 0 && this.#headerFill === 0 && n - i >= 5) {
        const type = chunk[i]!
        const length = ((chunk[i + 1]! << 24) | (chunk[i + 2]! << 16) | (chunk[i + 3]! << 8) | chunk[i + 4]!) >>> 0
        if (type === Backend.CommandComplete || type === Backend.ParameterStatus) this.#watch(type, chunk, i + 5, Math.min(i + 1 + length, n))
        const mode = this.#modeFor(type)
        if (mode === 'forward') {
          // Extend the run of forwarded frames; copy it out in one piece later.
          if (runStart < 0) runStart = i
          const end = i + 1 + length
          if (end <= n) {
            if (type === Backend.ReadyForQuery) this.lastStatus = chunk[end - 1]!
            i = end
            continue
          }
          this.#type = type
          this.#mode = 'forward'
          this.#remaining = end - n
          i = n
          continue
        }
        if (runStart >= 0) this.#out.append(chunk.subarray(runStart, i))
        runStart = -1
        if (mode === 'hold') this.#held.append(chunk.subarray(i, i + 5))
        else if (mode === 'error') this.#error.append(chunk.subarray(i, i + 5))
        i += 5
        this.#begin(type, mode, length - 4)
        continue
      }
      if (runStart >= 0) {
        this.#out.append(chunk.subarray(runStart, i))
        runStart = -1
      }
      if (this.#remaining > 0) {
        const take = Math.min(this.#remaining, n - i)
        const piece = chunk.subarray(i, i + take)
        if (this.#mode === 'forward') this.#out.append(piece)
        else if (this.#mode === 'hold') this.#held.append(piece)
        else if (this.#mode === 'error') this.#error.append(piece)
        this.#remaining -= take
        i += take
        if (this.#remaining === 0) {
          if (this.#type === Backend.ReadyForQuery && take > 0) this.lastStatus = piece[take - 1]!
          if (this.#mode === 'error') this.#endError()
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
        // The body is in the next chunk: assume the worst.
        if (type === Backend.CommandComplete || type === Backend.ParameterStatus) this.meaningMayChange = true
        const mode = this.#modeFor(type)
        if (mode === 'forward') this.#out.append(this.#header)
        else if (mode === 'hold') this.#held.append(this.#header)
        else if (mode === 'error') this.#error.append(this.#header)
        this.#begin(type, mode, length - 4)
      }
    }
    if (runStart >= 0) this.#out.append(chunk.subarray(runStart, n))
  }

  /** Looks at a CommandComplete's tag (in `chunk[start, end)`, maybe cut short) or notes a ParameterStatus. */
  #watch(type: number, chunk: Uint8Array, start: number, end: number): void {
    if (type === Backend.ParameterStatus || !isPlainTag(chunk, start, end)) this.meaningMayChange = true
  }

  #modeFor(type: number): Mode {
    // A held CommandComplete was not the last one: it goes out before this frame.
    if (this.#held.length > 0 && type !== Backend.ReadyForQuery) this.settleHeld(true)
    // Notifications reach clients through the multiplexer's routing, never
    // as part of whichever client's output they happened to appear in.
    if (type === Backend.NotificationResponse) return 'drop'
    if (type === Backend.ErrorResponse) {
      this.errorSeen = true
      if (this.rewriteError) return 'error'
    }
    if (type === Backend.ReadyForQuery && this.dropReady) return 'drop'
    if (type === Backend.CommandComplete && this.holdComplete) return 'hold'
    if (type === Backend.CopyInResponse && this.dropCopyIn) {
      this.dropCopyIn = false
      return 'drop'
    }
    return 'forward'
  }

  /** A whole ErrorResponse was gathered: it goes out rewritten. */
  #endError(): void {
    const error = this.#error
    this.#out.append(this.rewriteError!(error.bytes.subarray(0, error.length)))
    error.length = 0
  }

  #begin(type: number, mode: Mode, bodyLength: number): void {
    if (mode === 'error' && bodyLength === 0) this.#endError()
    this.#type = type
    this.#mode = bodyLength === 0 ? 'forward' : mode
    this.#remaining = bodyLength
  }
}

/**
 * Command tags that cannot create, rename or drop an object or change a
 * setting by themselves (functions they call aside). `SELECT n` also ends
 * CREATE TABLE AS and SELECT INTO: the session spots those in the SQL.
 */
const PLAIN_TAGS: readonly Uint8Array[] = [
  'SELECT ', 'INSERT ', 'UPDATE ', 'DELETE ', 'MERGE ', 'FETCH ', 'MOVE ', 'COPY ',
  'BEGIN\0', 'START TRANSACTION\0', 'COMMIT\0', 'ROLLBACK\0', 'SAVEPOINT\0', 'RELEASE\0',
  'SHOW\0', 'LISTEN\0', 'UNLISTEN\0', 'NOTIFY\0', 'EXPLAIN\0', 'DECLARE CURSOR\0', 'CLOSE CURSOR\0',
  'PREPARE\0', 'DEALLOCATE\0', 'DEALLOCATE ALL\0',
].map((t) => new TextEncoder().encode(t))

function isPlainTag(chunk: Uint8Array, start: number, end: number): boolean {
  outer: for (const tag of PLAIN_TAGS) {
    if (end - start < tag.length) continue
    for (let k = 0; k < tag.length; k++) if (chunk[start + k] !== tag[k]) continue outer
    return true
  }
  return false
}
