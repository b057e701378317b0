import { raiseError, type EngineAccess } from '../backend/raise-error.js'
import type { ImportedFunction } from './side-module-links.js'

/*
 * The engine's encoding conversions (`utf8_and_iso8859_1.so`,
 * `utf8_and_win.so`, `euc_jp_and_sjis.so`, ...) are side modules that call
 * helpers of Postgres' conv.c, wchar.c and mbutils.c: UtfToLocal,
 * LocalToUtf, local2local, the MULE helpers, pg_utf8_islegal,
 * pg_encoding_verifymbchar and the two error reports. The published build
 * stripped those from the main module, so the glue linked each call to a
 * stub that threw and ended the engine at the first non-ASCII character in
 * another client encoding. These are our implementations, working on the
 * engine's memory with the C functions' arguments and results: a byte
 * string's pointer and length in, the bytes written and the count consumed
 * out, Postgres' SQLSTATEs and messages on bad input. Facts are from
 * PostgreSQL 18 (pg_wchar.h, conv.c, wchar.c, mbutils.c).
 */

/** Postgres' encoding names, by their number in `enum pg_enc` (as `pg_encoding_to_char` spells them). */
export const ENCODING_NAMES: readonly string[] = [
  'SQL_ASCII',
  'EUC_JP',
  'EUC_CN',
  'EUC_KR',
  'EUC_TW',
  'EUC_JIS_2004',
  'UTF8',
  'MULE_INTERNAL',
  'LATIN1',
  'LATIN2',
  'LATIN3',
  'LATIN4',
  'LATIN5',
  'LATIN6',
  'LATIN7',
  'LATIN8',
  'LATIN9',
  'LATIN10',
  'WIN1256',
  'WIN1258',
  'WIN866',
  'WIN874',
  'KOI8R',
  'WIN1251',
  'WIN1252',
  'ISO_8859_5',
  'ISO_8859_6',
  'ISO_8859_7',
  'ISO_8859_8',
  'WIN1250',
  'WIN1253',
  'WIN1254',
  'WIN1255',
  'WIN1257',
  'KOI8U',
  'SJIS',
  'BIG5',
  'GBK',
  'UHC',
  'GB18030',
  'JOHAB',
  'SHIFT_JIS_2004',
]

const PG_UTF8 = ENCODING_NAMES.indexOf('UTF8')
const PG_MULE_INTERNAL = ENCODING_NAMES.indexOf('MULE_INTERNAL')
const PG_GB18030 = ENCODING_NAMES.indexOf('GB18030')

/** SQLSTATEs: character_not_in_repertoire, untranslatable_character, invalid_parameter_value, internal_error. */
const INVALID_BYTES = '22021'
const UNTRANSLATABLE = '22P05'
const INVALID_PARAMETER = '22023'
const INTERNAL = 'XX000'

/** EUC's single shifts: a 2-byte (SS2) or 3-byte (SS3) character follows. */
const SS2 = 0x8e
const SS3 = 0x8f
/**
 * Postgres' verifiers for the 2-byte Asian encodings reject this one pair,
 * which `pg_encoding_set_invalid` writes to mark a bad character.
 */
const INVALID_PAIR = [0x8d, 0x20] as const

const highBit = (byte: number): boolean => (byte & 0x80) !== 0
const eucRange = (byte: number): boolean => byte >= 0xa1 && byte <= 0xfe

/** The byte length of the character at `at`, from its first byte (GB18030: its first two). */
type CharLength = (heap: Uint8Array, at: number) => number
/** The length of the valid character at `at` with `len` bytes left, or -1. */
type CharVerifier = (heap: Uint8Array, at: number, len: number) => number

const oneByte: CharLength = () => 1
const acceptByte: CharVerifier = () => 1

function utf8Length(lead: number): number {
  if ((lead & 0x80) === 0) return 1
  if ((lead & 0xe0) === 0xc0) return 2
  if ((lead & 0xf0) === 0xe0) return 3
  if ((lead & 0xf8) === 0xf0) return 4
  // An illegal lead byte counts as one character, for the verifier to reject.
  return 1
}

/** RFC 3629's rules for one character of `length` bytes (as `pg_utf8_islegal`: no overlongs, surrogates or code points past U+10FFFF). */
export function utf8IsLegal(heap: Uint8Array, at: number, length: number): boolean {
  if (length < 1 || length > 4) return false
  for (let i = length - 1; i >= 2; i--) {
    const b = heap[at + i]!
    if (b < 0x80 || b > 0xbf) return false
  }
  const lead = heap[at]!
  if (length >= 2) {
    const second = heap[at + 1]!
    // The second byte's range depends on the lead: E0 and F0 exclude overlongs, ED surrogates, F4 what is past U+10FFFF.
    const [low, high] = lead === 0xe0 ? [0xa0, 0xbf] : lead === 0xed ? [0x80, 0x9f] : lead === 0xf0 ? [0x90, 0xbf] : lead === 0xf4 ? [0x80, 0x8f] : [0x80, 0xbf]
    if (second < low || second > high) return false
  }
  return !(lead >= 0x80 && lead < 0xc2) && lead <= 0xf4
}

const utf8CharLength: CharLength = (heap, at) => utf8Length(heap[at]!)

const utf8Verifier: CharVerifier = (heap, at, len) => {
  const lead = heap[at]!
  if (!highBit(lead)) return lead === 0 ? -1 : 1
  const l = utf8Length(lead)
  return l > len || !utf8IsLegal(heap, at, l) ? -1 : l
}

/** EUC_JP, EUC_KR, EUC_JIS_2004 and JOHAB: SS2 leads 2 bytes, SS3 3, any other high byte 2. */
const eucLength: CharLength = (heap, at) => {
  const c = heap[at]!
  return c === SS2 ? 2 : c === SS3 ? 3 : highBit(c) ? 2 : 1
}

/** EUC_CN: its code sets 2 and 3 are 3 bytes long where they appear at all. */
const eucCnLength: CharLength = (heap, at) => {
  const c = heap[at]!
  return c === SS2 || c === SS3 ? 3 : highBit(c) ? 2 : 1
}

/** EUC_TW: SS2 leads a 4-byte CNS 11643 character. */
const eucTwLength: CharLength = (heap, at) => {
  const c = heap[at]!
  return c === SS2 ? 4 : c === SS3 ? 3 : highBit(c) ? 2 : 1
}

/** MULE internal code: the leading byte names the charset and with it the length. */
function muleLength(lead: number): number {
  if (lead >= 0x81 && lead <= 0x8d) return 2
  if (lead === 0x9a || lead === 0x9b) return 3
  if (lead >= 0x90 && lead <= 0x99) return 3
  if (lead === 0x9c || lead === 0x9d) return 4
  return 1
}

const muleCharLength: CharLength = (heap, at) => muleLength(heap[at]!)

/** SJIS and SHIFT_JIS_2004: A1-DF are 1-byte kana, other high bytes lead 2 bytes. */
const sjisLength: CharLength = (heap, at) => {
  const c = heap[at]!
  return c >= 0xa1 && c <= 0xdf ? 1 : highBit(c) ? 2 : 1
}

/** BIG5, GBK and UHC: any high byte leads 2 bytes. */
const doubleByteLength: CharLength = (heap, at) => (highBit(heap[at]!) ? 2 : 1)

/** GB18030: a digit after a high byte makes a 4-byte character. */
const gb18030Length: CharLength = (heap, at) => {
  if (!highBit(heap[at]!)) return 1
  const next = heap[at + 1]!
  return next >= 0x30 && next <= 0x39 ? 4 : 2
}

const eucJpVerifier: CharVerifier = (heap, at, len) => {
  const c1 = heap[at]!
  if (c1 === SS2) {
    if (len < 2) return -1
    const c2 = heap[at + 1]!
    return c2 < 0xa1 || c2 > 0xdf ? -1 : 2
  }
  if (c1 === SS3) {
    if (len < 3) return -1
    return eucRange(heap[at + 1]!) && eucRange(heap[at + 2]!) ? 3 : -1
  }
  if (!highBit(c1)) return 1
  if (len < 2) return -1
  return eucRange(c1) && eucRange(heap[at + 1]!) ? 2 : -1
}

/** EUC_KR, and EUC_CN (the same byte sequences). */
const eucKrVerifier: CharVerifier = (heap, at, len) => {
  const c1 = heap[at]!
  if (!highBit(c1)) return 1
  if (len < 2) return -1
  return eucRange(c1) && eucRange(heap[at + 1]!) ? 2 : -1
}

const eucTwVerifier: CharVerifier = (heap, at, len) => {
  const c1 = heap[at]!
  if (c1 === SS2) {
    if (len < 4) return -1
    const plane = heap[at + 1]!
    if (plane < 0xa1 || plane > 0xa7) return -1
    return eucRange(heap[at + 2]!) && eucRange(heap[at + 3]!) ? 4 : -1
  }
  if (c1 === SS3) return -1
  if (!highBit(c1)) return 1
  if (len < 2) return -1
  // Postgres checks only the second byte of a plane-1 character.
  return eucRange(heap[at + 1]!) ? 2 : -1
}

const johabVerifier: CharVerifier = (heap, at, len) => {
  const l = eucLength(heap, at)
  if (len < l) return -1
  if (!highBit(heap[at]!)) return l
  for (let i = 1; i < l; i++) if (!eucRange(heap[at + i]!)) return -1
  return l
}

const muleVerifier: CharVerifier = (heap, at, len) => {
  const l = muleLength(heap[at]!)
  if (len < l) return -1
  for (let i = 1; i < l; i++) if (!highBit(heap[at + i]!)) return -1
  return l
}

const sjisVerifier: CharVerifier = (heap, at, len) => {
  const l = sjisLength(heap, at)
  if (len < l) return -1
  if (l === 1) return 1
  const c1 = heap[at]!
  const c2 = heap[at + 1]!
  const head = (c1 >= 0x81 && c1 <= 0x9f) || (c1 >= 0xe0 && c1 <= 0xfc)
  const tail = (c2 >= 0x40 && c2 <= 0x7e) || (c2 >= 0x80 && c2 <= 0xfc)
  return head && tail ? 2 : -1
}

/** BIG5, GBK and UHC: any non-NUL trail byte, except the marker pair. */
const doubleByteVerifier: CharVerifier = (heap, at, len) => {
  const l = doubleByteLength(heap, at)
  if (len < l) return -1
  if (l === 2 && heap[at] === INVALID_PAIR[0] && heap[at + 1] === INVALID_PAIR[1]) return -1
  for (let i = 1; i < l; i++) if (heap[at + i] === 0) return -1
  return l
}

const gb18030Verifier: CharVerifier = (heap, at, len) => {
  const c1 = heap[at]!
  if (!highBit(c1)) return 1
  const c2 = heap[at + 1]!
  const digit = (b: number): boolean => b >= 0x30 && b <= 0x39
  const lead = (b: number): boolean => b >= 0x81 && b <= 0xfe
  if (len >= 4 && digit(c2)) return lead(c1) && lead(heap[at + 2]!) && digit(heap[at + 3]!) ? 4 : -1
  if (len >= 2 && lead(c1)) return (c2 >= 0x40 && c2 <= 0x7e) || (c2 >= 0x80 && c2 <= 0xfe) ? 2 : -1
  return -1
}

interface EncodingRules {
  readonly charLength: CharLength
  readonly verify: CharVerifier
}

const SINGLE_BYTE: EncodingRules = { charLength: oneByte, verify: acceptByte }

/** Each encoding's rules, by number; the ones not named are single-byte. */
const MULTIBYTE: Readonly<Record<string, EncodingRules>> = {
  EUC_JP: { charLength: eucLength, verify: eucJpVerifier },
  EUC_CN: { charLength: eucCnLength, verify: eucKrVerifier },
  EUC_KR: { charLength: eucLength, verify: eucKrVerifier },
  EUC_TW: { charLength: eucTwLength, verify: eucTwVerifier },
  EUC_JIS_2004: { charLength: eucLength, verify: eucJpVerifier },
  UTF8: { charLength: utf8CharLength, verify: utf8Verifier },
  MULE_INTERNAL: { charLength: muleCharLength, verify: muleVerifier },
  SJIS: { charLength: sjisLength, verify: sjisVerifier },
  BIG5: { charLength: doubleByteLength, verify: doubleByteVerifier },
  GBK: { charLength: doubleByteLength, verify: doubleByteVerifier },
  UHC: { charLength: doubleByteLength, verify: doubleByteVerifier },
  GB18030: { charLength: gb18030Length, verify: gb18030Verifier },
  JOHAB: { charLength: eucLength, verify: johabVerifier },
  SHIFT_JIS_2004: { charLength: sjisLength, verify: sjisVerifier },
}

const RULES: readonly EncodingRules[] = ENCODING_NAMES.map((name) => MULTIBYTE[name] ?? SINGLE_BYTE)

const validEncoding = (encoding: number): boolean => encoding >= 0 && encoding < ENCODING_NAMES.length

/** An unknown encoding number is treated as SQL_ASCII, as Postgres' table lookups do. */
const rulesOf = (encoding: number): EncodingRules => (validEncoding(encoding) ? RULES[encoding]! : SINGLE_BYTE)

const nameOf = (encoding: number): string => ENCODING_NAMES[encoding] ?? `encoding ${encoding}`

/** The verifier of `encoding` (`pg_encoding_verifymbchar`). */
export function verifyChar(encoding: number, heap: Uint8Array, at: number, len: number): number {
  return rulesOf(encoding).verify(heap, at, len)
}

/**
 * The bytes an error message shows: the character at `at` as far as `len`
 * allows, at most 8, as `0x..` separated by spaces. Zero bytes left (or one
 * high GB18030 byte, whose length needs the next) shows them all.
 */
export function bytesShown(encoding: number, heap: Uint8Array, at: number, len: number): string {
  const incomplete = len < 1 || (encoding === PG_GB18030 && highBit(heap[at]!) && len < 2)
  const count = Math.min(incomplete ? len : rulesOf(encoding).charLength(heap, at), len, 8)
  const shown: string[] = []
  for (let i = 0; i < count; i++) shown.push(`0x${heap[at + i]!.toString(16).padStart(2, '0')}`)
  return shown.join(' ')
}

/*
 * pg_mb_radix_tree on wasm32 (pg_wchar.h): the chars16 and chars32
 * pointers, then for 1- to 4-byte inputs a uint32 root offset followed by
 * one lower and upper bound per byte, each root aligned to 4.
 */
const TREE_CHARS16 = 0
const TREE_CHARS32 = 4
const TREE_ROOT = [0, 8, 16, 24, 36] as const
const TREE_BOUNDS = [0, 12, 20, 28, 40] as const

/** One of the conversion maps the side modules hold in their static data. */
class RadixTree {
  readonly #heap: Uint8Array
  readonly #chars16: number
  readonly #chars32: number
  readonly #at: number

  constructor(heap: Uint8Array, at: number) {
    this.#heap = heap
    this.#at = at
    this.#chars16 = readU32(heap, at + TREE_CHARS16)
    this.#chars32 = readU32(heap, at + TREE_CHARS32)
  }

  #entry(index: number): number {
    const heap = this.#heap
    if (this.#chars32 !== 0) return readU32(heap, this.#chars32 + 4 * index)
    const at = this.#chars16 + 2 * index
    return heap[at]! | (heap[at + 1]! << 8)
  }

  /**
   * The code `bytes` (its last `length` entries are the character) maps to,
   * or 0. Each byte must lie within its level's bounds; the value found at
   * one level is where the next level's table starts (an intermediate
   * entry that points nowhere leads to the all-zero table at the start).
   */
  convert(length: number, bytes: readonly number[]): number {
    if (length < 1 || length > 4) return 0
    const heap = this.#heap
    const bounds = this.#at + TREE_BOUNDS[length]!
    const input = bytes.slice(4 - length)
    for (let i = 0; i < length; i++) {
      if (input[i]! < heap[bounds + 2 * i]! || input[i]! > heap[bounds + 2 * i + 1]!) return 0
    }
    let index = readU32(heap, this.#at + TREE_ROOT[length]!)
    // Postgres reads a 16-bit tree's root for 2- to 4-byte inputs into a uint16.
    if (this.#chars32 === 0 && length > 1) index &= 0xffff
    for (let i = 0; i < length; i++) index = this.#entry(input[i]! + index - heap[bounds + 2 * i]!)
    return index >>> 0
  }
}

function readU32(heap: Uint8Array, at: number): number {
  return (heap[at]! | (heap[at + 1]! << 8) | (heap[at + 2]! << 16) | (heap[at + 3]! << 24)) >>> 0
}

/** Writes `code`'s non-zero bytes, most significant first (as `store_coded_char`); returns where writing ends. */
function storeCode(heap: Uint8Array, at: number, code: number): number {
  for (let shift = 24; shift >= 0; shift -= 8) {
    const byte = (code >>> shift) & 0xff
    if (byte !== 0) heap[at++] = byte
  }
  return at
}

/**
 * Binary search of a sorted array of 12-byte entries (three uint32) for
 * the one whose first `keys.length` words equal `keys`; its address or 0.
 */
function findCombined(heap: Uint8Array, table: number, count: number, keys: readonly number[]): number {
  let low = 0
  let high = count - 1
  while (low <= high) {
    const mid = (low + high) >>> 1
    const entry = table + 12 * mid
    let order = 0
    for (let k = 0; k < keys.length && order === 0; k++) {
      const word = readU32(heap, entry + 4 * k)
      order = keys[k]! > word ? 1 : keys[k]! < word ? -1 : 0
    }
    if (order === 0) return entry
    if (order > 0) low = mid + 1
    else high = mid - 1
  }
  return 0
}

/** A character's bytes as (b1, b2, b3, b4), right-aligned as the C code keeps them, and their uint32. */
function collect(heap: Uint8Array, at: number, length: number): { bytes: number[]; code: number } {
  const bytes = [0, 0, 0, 0]
  for (let i = 0; i < length; i++) bytes[4 - length + i] = heap[at + i]!
  return { bytes, code: ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0 }
}

/** The helpers the conversion side modules import, by their C names, working on `engine`'s memory. */
export function encodingConversions(engine: EngineAccess): Readonly<Record<string, ImportedFunction>> {
  const heap = (): Uint8Array => engine.module()!.HEAPU8

  const invalid = (encoding: number, at: number, len: number): never =>
    raiseError(engine, {
      code: INVALID_BYTES,
      message: `invalid byte sequence for encoding "${nameOf(encoding)}": ${bytesShown(encoding, heap(), at, len)}`,
      routine: 'report_invalid_encoding',
    })

  const untranslatable = (from: number, to: number, at: number, len: number): never =>
    raiseError(engine, {
      code: UNTRANSLATABLE,
      message: `character with byte sequence ${bytesShown(from, heap(), at, len)} in encoding "${nameOf(from)}" has no equivalent in encoding "${nameOf(to)}"`,
      routine: 'report_untranslatable_char',
    })

  const checkEncoding = (encoding: number, routine: string): void => {
    if (!validEncoding(encoding)) raiseError(engine, { code: INVALID_PARAMETER, message: `invalid encoding number: ${encoding}`, routine })
  }

  const badLength = (length: number, routine: string): never =>
    raiseError(engine, { code: INTERNAL, message: `unsupported character length ${length}`, routine })

  /** A conversion function pointer of the side module: a slot of the shared function table. */
  const conversionFunction = (slot: number): ((code: number) => number) | undefined => {
    if (slot === 0) return undefined
    const table = engine.exports()!.__indirect_function_table as WebAssembly.Table
    const fn = table.get(slot) as (code: number) => number
    return (code) => fn(code) >>> 0
  }

  /** UTF8 -> a local encoding: combined pairs first, then the tree, then the function; returns the bytes consumed. */
  const utfToLocal = (utf: number, len: number, out: number, map: number, cmap: number, cmapSize: number, convFunc: number, encoding: number, noError: number): number => {
    checkEncoding(encoding, 'UtfToLocal')
    let h = heap()
    let tree = map === 0 ? undefined : new RadixTree(h, map)
    const convert = conversionFunction(convFunc)
    let at = utf
    let o = out
    let l = 0
    for (; len > 0; len -= l) {
      if (h[at] === 0) break
      l = utf8Length(h[at]!)
      if (len < l || !utf8IsLegal(h, at, l)) break
      if (l === 1) {
        h[o++] = h[at++]!
        continue
      }
      const { bytes, code } = collect(h, at, l)
      at += l
      // A pair of characters may map to one local character (e.g. a letter and a combining mark).
      if (cmap !== 0 && len > l) {
        const saved = { at, len, l }
        len -= l
        l = utf8Length(h[at]!)
        if (len < l) {
          // Whether this is a pair needs more input than there is.
          at -= saved.l
          break
        }
        if (!utf8IsLegal(h, at, l)) {
          if (!noError) invalid(PG_UTF8, at, len)
          at -= saved.l
          break
        }
        if (l > 1) {
          const second = collect(h, at, l).code
          at += l
          const entry = findCombined(h, cmap, cmapSize, [code, second])
          if (entry !== 0) {
            o = storeCode(h, o, readU32(h, entry + 8))
            continue
          }
        }
        ;({ at, len, l } = saved)
      }
      const mapped = tree?.convert(l, bytes) ?? 0
      if (mapped !== 0) {
        o = storeCode(h, o, mapped)
        continue
      }
      if (convert) {
        const converted = convert(code)
        // A call into the engine may have grown its memory (and replaced the buffer).
        if (h !== heap()) {
          h = heap()
          tree = map === 0 ? undefined : new RadixTree(h, map)
        }
        if (converted !== 0) {
          o = storeCode(h, o, converted)
          continue
        }
      }
      at -= l
      if (noError) break
      untranslatable(PG_UTF8, encoding, at, len)
    }
    if (len > 0 && !noError) invalid(PG_UTF8, at, len)
    h[o] = 0
    return at - utf
  }

  /** A local encoding -> UTF8: the tree, then combined pairs, then the function; returns the bytes consumed. */
  const localToUtf = (iso: number, len: number, out: number, map: number, cmap: number, cmapSize: number, convFunc: number, encoding: number, noError: number): number => {
    checkEncoding(encoding, 'LocalToUtf')
    let h = heap()
    let tree = map === 0 ? undefined : new RadixTree(h, map)
    const convert = conversionFunction(convFunc)
    let at = iso
    let o = out
    let l = 0
    for (; len > 0; len -= l) {
      if (h[at] === 0) break
      if (!highBit(h[at]!)) {
        h[o++] = h[at++]!
        l = 1
        continue
      }
      l = verifyChar(encoding, h, at, len)
      if (l < 0) break
      if (l > 4) badLength(l, 'LocalToUtf')
      const { bytes, code } = collect(h, at, l)
      at += l
      if (tree) {
        const mapped = tree.convert(l, bytes)
        if (mapped !== 0) {
          o = storeCode(h, o, mapped)
          continue
        }
        // Some local characters stand for a pair of Unicode ones.
        const entry = cmap === 0 ? 0 : findCombined(h, cmap, cmapSize, [code])
        if (entry !== 0) {
          o = storeCode(h, o, readU32(h, entry + 4))
          o = storeCode(h, o, readU32(h, entry + 8))
          continue
        }
      }
      if (convert) {
        const converted = convert(code)
        // A call into the engine may have grown its memory (and replaced the buffer).
        if (h !== heap()) {
          h = heap()
          tree = map === 0 ? undefined : new RadixTree(h, map)
        }
        if (converted !== 0) {
          o = storeCode(h, o, converted)
          continue
        }
      }
      at -= l
      if (noError) break
      untranslatable(encoding, PG_UTF8, at, len)
    }
    if (len > 0 && !noError) invalid(encoding, at, len)
    h[o] = 0
    return at - iso
  }

  /** One single-byte encoding to another through `table` (the target byte for each of 0x80-0xff, 0 where none). */
  const localToLocal = (src: number, out: number, len: number, from: number, to: number, table: number, noError: number): number => {
    const h = heap()
    let at = src
    let o = out
    for (; len > 0; at++, len--) {
      const c = h[at]!
      if (c === 0) {
        if (noError) break
        invalid(from, at, len)
      }
      if (!highBit(c)) {
        h[o++] = c
        continue
      }
      const mapped = h[table + c - 0x80]!
      if (mapped === 0) {
        if (noError) break
        untranslatable(from, to, at, len)
      }
      h[o++] = mapped
    }
    h[o] = 0
    return at - src
  }

  /**
   * A single-byte encoding to MULE: a high byte becomes the charset's
   * leading byte `lc` and the byte itself, or, with `table`, the table's
   * byte (0: no equivalent).
   */
  const latinToMic = (src: number, out: number, len: number, lc: number, encoding: number, table: number, noError: number): number => {
    const h = heap()
    let at = src
    let o = out
    for (; len > 0; at++, len--) {
      const c = h[at]!
      if (c === 0) {
        if (noError) break
        invalid(encoding, at, len)
      }
      if (!highBit(c)) {
        h[o++] = c
        continue
      }
      const mapped = table === 0 ? c : h[table + c - 0x80]!
      if (mapped === 0) {
        if (noError) break
        untranslatable(encoding, PG_MULE_INTERNAL, at, len)
      }
      h[o++] = lc
      h[o++] = mapped
    }
    h[o] = 0
    return at - src
  }

  /** MULE to a single-byte encoding: only 2-byte characters of charset `lc`, through `table` when given. */
  const micToLatin = (src: number, out: number, len: number, lc: number, encoding: number, table: number, noError: number): number => {
    const h = heap()
    let at = src
    let o = out
    while (len > 0) {
      const c = h[at]!
      if (c === 0) {
        if (noError) break
        invalid(PG_MULE_INTERNAL, at, len)
      }
      if (!highBit(c)) {
        h[o++] = c
        at++
        len--
        continue
      }
      const l = muleLength(c)
      if (len < l) {
        if (noError) break
        invalid(PG_MULE_INTERNAL, at, len)
      }
      const second = h[at + 1]!
      const mapped = l !== 2 || c !== lc || !highBit(second) ? 0 : table === 0 ? second : h[table + second - 0x80]!
      if (mapped === 0) {
        if (noError) break
        untranslatable(PG_MULE_INTERNAL, encoding, at, len)
      }
      h[o++] = mapped
      at += 2
      len -= 2
    }
    h[o] = 0
    return at - src
  }

  return {
    pg_utf8_islegal: (at, length) => (utf8IsLegal(heap(), at, length) ? 1 : 0),
    pg_encoding_verifymbchar: (encoding, at, len) => verifyChar(encoding, heap(), at, len),
    report_invalid_encoding: (encoding, at, len) => invalid(encoding, at, len),
    report_untranslatable_char: (from, to, at, len) => untranslatable(from, to, at, len),
    UtfToLocal: utfToLocal,
    LocalToUtf: localToUtf,
    local2local: localToLocal,
    latin2mic: (src, out, len, lc, encoding, noError) => latinToMic(src, out, len, lc, encoding, 0, noError),
    mic2latin: (src, out, len, lc, encoding, noError) => micToLatin(src, out, len, lc, encoding, 0, noError),
    latin2mic_with_table: latinToMic,
    mic2latin_with_table: micToLatin,
  }
}
