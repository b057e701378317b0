/** Scans of SQL bytes that decode nothing: words and identifier bytes. */

/** Whether `bytes[from, to)` holds the word `lower` in any case, not inside a longer identifier (a byte scan, nothing decoded). */
export function mentions(bytes: Uint8Array, from: number, to: number, lower: string): boolean {
  const first = lower.charCodeAt(0)
  outer: for (let i = from; i + lower.length <= to; i++) {
    if (toLower(bytes[i]!) !== first || (i > from && isWordByte(bytes[i - 1]!))) continue
    for (let k = 1; k < lower.length; k++) if (toLower(bytes[i + k]!) !== lower.charCodeAt(k)) continue outer
    if (i + lower.length < to && isWordByte(bytes[i + lower.length]!)) continue
    return true
  }
  return false
}

/**
 * Whether `bytes[from, to)` holds any of the words `lowers` (as {@link
 * mentions} finds one), in one pass over the bytes however many words.
 */
export function mentionsAny(bytes: Uint8Array, from: number, to: number, lowers: readonly string[]): boolean {
  let i = from
  while (i < to) {
    if (!isWordByte(bytes[i]!)) {
      i++
      continue
    }
    let end = i + 1
    while (end < to && isWordByte(bytes[end]!)) end++
    for (const word of lowers) if (end - i === word.length && sameWord(bytes, i, word)) return true
    i = end
  }
  return false
}

function sameWord(bytes: Uint8Array, at: number, lower: string): boolean {
  for (let k = 0; k < lower.length; k++) if (toLower(bytes[at + k]!) !== lower.charCodeAt(k)) return false
  return true
}

function toLower(b: number): number {
  return b >= 0x41 && b <= 0x5a ? b | 0x20 : b
}

/** Letters, digits, `_`, `$` and every byte of a multi-byte character: what continues an identifier. */
export function isWordByte(b: number): boolean {
  const c = b | 0x20
  return (c >= 0x61 && c <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x5f || b === 0x24 || b >= 0x80
}
