/**
 * The values of a request or a reply as bytes in shared memory, for the
 * shared-memory lane of a worker channel. Covers what queries carry
 * (strings, numbers, bigints, booleans, null, undefined, `Date`,
 * `Uint8Array`, arrays, plain objects), each arriving as structured clone
 * would deliver it. Anything else, a cycle or a message that does not fit
 * throws {@link Unencodable}, and the message goes by `postMessage` instead.
 */

export class Unencodable extends Error {}

const T_UNDEFINED = 0
const T_NULL = 1
const T_FALSE = 2
const T_TRUE = 3
const T_INT = 4
const T_FLOAT = 5
const T_STRING = 6
const T_BIGINT = 7
const T_DATE = 8
const T_BYTES = 9
const T_ARRAY = 10
const T_OBJECT = 11

/** Deeper than any query value; a cyclic parameter object gets here and goes by postMessage. */
const MAX_DEPTH = 64

const utf8 = new TextEncoder()
const utf8Decoder = new TextDecoder()

/** A position in a byte array and a `DataView` over it: what the writer and the reader both walk. */
abstract class ByteCursor {
  protected readonly bytes: Uint8Array
  protected readonly view: DataView
  protected at = 0

  constructor(bytes: Uint8Array) {
    this.bytes = bytes
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }
}

/** Writes into `bytes` (a view of shared memory); `encode` returns the length written. */
export class SharedWriter extends ByteCursor {
  /** @throws {Unencodable} for a value outside the covered types, a cycle, or a message past the capacity. */
  encode(value: unknown): number {
    this.at = 0
    this.#value(value, 0)
    return this.at
  }

  #room(n: number): void {
    if (this.at + n > this.bytes.byteLength) throw new Unencodable('the message does not fit in shared memory')
  }

  #tag(tag: number): void {
    this.#room(1)
    this.bytes[this.at++] = tag
  }

  #u32(n: number): void {
    this.#room(4)
    this.view.setUint32(this.at, n, true)
    this.at += 4
  }

  #f64(n: number): void {
    this.#room(8)
    this.view.setFloat64(this.at, n, true)
    this.at += 8
  }

  #string(s: string): void {
    const length = s.length
    this.#room(4 + length)
    const bytes = this.bytes
    const start = this.at + 4
    let i = 0
    // Most text here is ASCII: written byte by byte, no encoder call.
    for (; i < length; i++) {
      const c = s.charCodeAt(i)
      if (c >= 0x80) break
      bytes[start + i] = c
    }
    let written = i
    if (i < length) {
      // Encoded apart and copied: browsers refuse `encodeInto` on shared memory.
      const rest = utf8.encode(s.slice(i))
      this.#room(4 + i + rest.byteLength)
      bytes.set(rest, start + i)
      written += rest.byteLength
    }
    this.view.setUint32(this.at, written, true)
    this.at = start + written
  }

  #value(v: unknown, depth: number): void {
    if (depth > MAX_DEPTH) throw new Unencodable('too deep, or cyclic')
    switch (typeof v) {
      case 'string':
        this.#tag(T_STRING)
        this.#string(v)
        return
      case 'number':
        if ((v | 0) === v && !Object.is(v, -0)) {
          this.#tag(T_INT)
          this.#room(4)
          this.view.setInt32(this.at, v, true)
          this.at += 4
        } else {
          this.#tag(T_FLOAT)
          this.#f64(v)
        }
        return
      case 'boolean':
        this.#tag(v ? T_TRUE : T_FALSE)
        return
      case 'undefined':
        this.#tag(T_UNDEFINED)
        return
      case 'bigint':
        this.#tag(T_BIGINT)
        this.#string(v.toString())
        return
      case 'object':
        break
      default:
        throw new Unencodable(`a ${typeof v} value`)
    }
    if (v === null) {
      this.#tag(T_NULL)
      return
    }
    if (Array.isArray(v)) {
      this.#tag(T_ARRAY)
      this.#u32(v.length)
      for (let i = 0; i < v.length; i++) this.#value(v[i], depth + 1)
      return
    }
    if (v instanceof Uint8Array) {
      this.#tag(T_BYTES)
      this.#u32(v.byteLength)
      this.#room(v.byteLength)
      this.bytes.set(v, this.at)
      this.at += v.byteLength
      return
    }
    if (v instanceof Date) {
      this.#tag(T_DATE)
      this.#f64(v.getTime())
      return
    }
    const proto = Object.getPrototypeOf(v) as unknown
    if (proto !== Object.prototype && proto !== null) throw new Unencodable('an object of a class')
    const keys = Object.keys(v)
    this.#tag(T_OBJECT)
    this.#u32(keys.length)
    for (const key of keys) {
      this.#string(key)
      this.#value((v as Record<string, unknown>)[key], depth + 1)
    }
  }
}

/** Reads one value back from a private (non-shared) copy of the bytes: `TextDecoder` refuses shared memory. */
export function decodeShared(bytes: Uint8Array): unknown {
  return new SharedReader(bytes).value()
}

/** ASCII strings up to this length are built from their bytes: cheaper than a `TextDecoder` call. */
const SHORT_STRING = 64

class SharedReader extends ByteCursor {
  #u32(): number {
    const n = this.view.getUint32(this.at, true)
    this.at += 4
    return n
  }

  #f64(): number {
    const n = this.view.getFloat64(this.at, true)
    this.at += 8
    return n
  }

  #string(): string {
    const length = this.#u32()
    const bytes = this.bytes
    const start = this.at
    const end = start + length
    this.at = end
    if (length <= SHORT_STRING) {
      let ascii = 0
      for (let i = start; i < end; i++) ascii |= bytes[i]!
      if (ascii < 0x80) return String.fromCharCode.apply(null, bytes.subarray(start, end) as unknown as number[])
    }
    return utf8Decoder.decode(bytes.subarray(start, end))
  }

  value(): unknown {
    const tag = this.bytes[this.at++]
    switch (tag) {
      case T_UNDEFINED:
        return undefined
      case T_NULL:
        return null
      case T_FALSE:
        return false
      case T_TRUE:
        return true
      case T_INT: {
        const n = this.view.getInt32(this.at, true)
        this.at += 4
        return n
      }
      case T_FLOAT:
        return this.#f64()
      case T_STRING:
        return this.#string()
      case T_BIGINT:
        return BigInt(this.#string())
      case T_DATE:
        return new Date(this.#f64())
      case T_BYTES: {
        const length = this.#u32()
        this.at += length
        return this.bytes.slice(this.at - length, this.at)
      }
      case T_ARRAY: {
        const length = this.#u32()
        const out: unknown[] = new Array(length)
        for (let i = 0; i < length; i++) out[i] = this.value()
        return out
      }
      case T_OBJECT: {
        const count = this.#u32()
        const out: Record<string, unknown> = {}
        for (let i = 0; i < count; i++) {
          const key = this.#string()
          // A column named __proto__ stays a field, as structured clone keeps it.
          if (key === '__proto__') Object.defineProperty(out, key, { value: this.value(), enumerable: true, writable: true, configurable: true })
          else out[key] = this.value()
        }
        return out
      }
      default:
        throw new Error(`corrupt shared message (tag ${String(tag)} at ${this.at - 1})`)
    }
  }
}
