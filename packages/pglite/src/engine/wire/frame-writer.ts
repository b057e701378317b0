import { Frontend } from './message-codes.js'

const utf8 = new TextEncoder()

/**
 * Builds frontend frames into one reused buffer. A request's frames
 * (Parse/Bind/Describe/Execute/Sync) are written back to back and handed to
 * the engine as one exec. The returned view is only valid until the next
 * `reset()`: build inside the queue turn that runs it.
 */
export class FrameWriter {
  #buf = new Uint8Array(4096)
  #view = new DataView(this.#buf.buffer)
  #pos = 0
  #frameStart = -1

  reset(): this {
    this.#pos = 0
    this.#frameStart = -1
    return this
  }

  #ensure(extra: number): void {
    const needed = this.#pos + extra
    if (needed <= this.#buf.byteLength) return
    const grown = new Uint8Array(Math.max(needed, this.#buf.byteLength * 2))
    grown.set(this.#buf.subarray(0, this.#pos))
    this.#buf = grown
    this.#view = new DataView(grown.buffer)
  }

  #begin(type: number): void {
    this.#ensure(5)
    this.#frameStart = this.#pos
    this.#buf[this.#pos] = type
    this.#pos += 5
  }

  #end(): void {
    this.#view.setInt32(this.#frameStart + 1, this.#pos - this.#frameStart - 1)
    this.#frameStart = -1
  }

  #int16(v: number): void {
    this.#ensure(2)
    this.#view.setInt16(this.#pos, v)
    this.#pos += 2
  }

  #int32(v: number): void {
    this.#ensure(4)
    this.#view.setInt32(this.#pos, v)
    this.#pos += 4
  }

  #cstring(s: string): void {
    // encodeInto needs room for the worst case: 3 bytes per UTF-16 unit.
    this.#ensure(s.length * 3 + 1)
    this.#pos += utf8.encodeInto(s, this.#buf.subarray(this.#pos)).written
    this.#buf[this.#pos++] = 0
  }

  #bytes(b: Uint8Array): void {
    this.#ensure(b.byteLength)
    this.#buf.set(b, this.#pos)
    this.#pos += b.byteLength
  }

  query(sql: string): this {
    this.#begin(Frontend.Query)
    this.#cstring(sql)
    this.#end()
    return this
  }

  parse(name: string, sql: string, paramTypes: readonly number[] = []): this {
    this.#begin(Frontend.Parse)
    this.#cstring(name)
    this.#cstring(sql)
    this.#int16(paramTypes.length)
    for (let i = 0; i < paramTypes.length; i++) this.#int32(paramTypes[i]!)
    this.#end()
    return this
  }

  /**
   * Bind with text parameters, except Uint8Array values, which go in binary
   * format (raw bytes: what bytea's binary input expects). Results are text.
   */
  bind(portal: string, statement: string, values: readonly (string | Uint8Array | null)[]): this {
    this.#begin(Frontend.Bind)
    this.#cstring(portal)
    this.#cstring(statement)
    let anyBinary = false
    for (let i = 0; i < values.length; i++) if (values[i] instanceof Uint8Array) anyBinary = true
    if (anyBinary) {
      this.#int16(values.length)
      for (let i = 0; i < values.length; i++) this.#int16(values[i] instanceof Uint8Array ? 1 : 0)
    } else {
      this.#int16(0)
    }
    this.#int16(values.length)
    for (let i = 0; i < values.length; i++) {
      const v = values[i]
      if (v === null || v === undefined) {
        this.#int32(-1)
      } else if (typeof v === 'string') {
        const lengthAt = this.#pos
        this.#int32(0)
        this.#ensure(v.length * 3)
        const written = utf8.encodeInto(v, this.#buf.subarray(this.#pos)).written
        this.#pos += written
        this.#view.setInt32(lengthAt, written)
      } else {
        this.#int32(v.byteLength)
        this.#bytes(v)
      }
    }
    this.#int16(0)
    this.#end()
    return this
  }

  describe(kind: 'S' | 'P', name: string): this {
    this.#begin(Frontend.Describe)
    this.#ensure(1)
    this.#buf[this.#pos++] = kind === 'S' ? 0x53 : 0x50
    this.#cstring(name)
    this.#end()
    return this
  }

  execute(portal = '', maxRows = 0): this {
    this.#begin(Frontend.Execute)
    this.#cstring(portal)
    this.#int32(maxRows)
    this.#end()
    return this
  }

  close(kind: 'S' | 'P', name: string): this {
    this.#begin(Frontend.Close)
    this.#ensure(1)
    this.#buf[this.#pos++] = kind === 'S' ? 0x53 : 0x50
    this.#cstring(name)
    this.#end()
    return this
  }

  copyFail(message: string): this {
    this.#begin(Frontend.CopyFail)
    this.#cstring(message)
    this.#end()
    return this
  }

  sync(): this {
    this.#begin(Frontend.Sync)
    this.#end()
    return this
  }

  /** The frames written since `reset()`, as a view of the shared buffer. */
  view(): Uint8Array {
    return this.#buf.subarray(0, this.#pos)
  }
}
