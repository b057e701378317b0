const utf8 = new TextDecoder()

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
