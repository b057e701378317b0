const utf8 = new TextDecoder()

/**
 * UTF-8 bytes to a string. Short ASCII runs (most column values) are built
 * directly: TextDecoder's per-call cost dominates for them.
 */
export function decodeText(buf: Uint8Array, start: number, end: number): string {
  const length = end - start
  if (length <= 24) {
    let s = ''
    for (let i = start; i < end; i++) {
      const c = buf[i]!
      if (c >= 0x80) return utf8.decode(buf.subarray(start, end))
      s += String.fromCharCode(c)
    }
    return s
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
