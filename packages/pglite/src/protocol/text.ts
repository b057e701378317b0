const utf8 = new TextDecoder()
/** One UTF-16 unit per byte (windows-1252): ASCII bytes map to themselves. */
const bytewise = new TextDecoder('latin1')

/**
 * UTF-8 bytes to a string. Values of up to four ASCII bytes (booleans,
 * small numbers, codes) are made with one `fromCharCode` call: for them
 * TextDecoder's per-call cost dominates; from about eight bytes on it is
 * the faster way (a char-by-char concatenation builds a rope that every
 * later read flattens).
 */
export function decodeText(buf: Uint8Array, start: number, end: number): string {
  switch (end - start) {
    case 0:
      return ''
    case 1: {
      const a = buf[start]!
      if (a < 0x80) return String.fromCharCode(a)
      break
    }
    case 2: {
      const a = buf[start]!
      const b = buf[start + 1]!
      if ((a | b) < 0x80) return String.fromCharCode(a, b)
      break
    }
    case 3: {
      const a = buf[start]!
      const b = buf[start + 1]!
      const c = buf[start + 2]!
      if ((a | b | c) < 0x80) return String.fromCharCode(a, b, c)
      break
    }
    case 4: {
      const a = buf[start]!
      const b = buf[start + 1]!
      const c = buf[start + 2]!
      const d = buf[start + 3]!
      if ((a | b | c | d) < 0x80) return String.fromCharCode(a, b, c, d)
      break
    }
  }
  return utf8.decode(buf.subarray(start, end))
}

/**
 * Strings of the values in one chunk of backend output, cut from one
 * decoding of the whole chunk: a `slice` costs a fraction of a TextDecoder
 * call per value. Only ASCII values are cut (their byte offsets are their
 * string offsets); others are decoded alone. The chunk's string lives as
 * long as a value cut from it (V8 slices share their parent), and chunks
 * are the engine's output writes of a few kilobytes.
 */
export class ChunkText {
  #chunk: Uint8Array | undefined
  #text = ''

  /** The string of `buf[start, end)`; `buf` is a chunk whose content does not change while it is the current one. */
  decode(buf: Uint8Array, start: number, end: number): string {
    if (end - start <= 4) return decodeText(buf, start, end)
    for (let i = start; i < end; i++) if (buf[i]! >= 0x80) return utf8.decode(buf.subarray(start, end))
    if (buf !== this.#chunk) {
      this.#chunk = buf
      this.#text = bytewise.decode(buf)
    }
    return this.#text.slice(start, end)
  }

  /** Forgets the chunk: its bytes may be overwritten from now on. */
  clear(): void {
    this.#chunk = undefined
    this.#text = ''
  }
}

/** Index of the NUL ending the C string that starts at `at`. */
export function cstringEnd(buf: Uint8Array, at: number, end: number): number {
  let i = at
  while (i < end && buf[i] !== 0) i++
  return i
}

export function readInt32(buf: Uint8Array, at: number): number {
  return (buf[at]! << 24) | (buf[at + 1]! << 16) | (buf[at + 2]! << 8) | buf[at + 3]!
}

export function readInt16(buf: Uint8Array, at: number): number {
  const v = (buf[at]! << 8) | buf[at + 1]!
  return v & 0x8000 ? v - 0x10000 : v
}
