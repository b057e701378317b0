import { ARRAY_OF, OID, arrayDelimiter } from './oids.js'

/** Converts one non-NULL value in PostgreSQL's text output format. */
export type Parser = (value: string, typeId: number) => unknown

const parseBool: Parser = (value) => value === 't'

// Unary plus rather than parseFloat: PostgreSQL prints NaN/Infinity/-Infinity
// exactly as JavaScript spells them, and '+' rejects trailing garbage.
const parseNumber: Parser = (value) => +value

/** Whether `parser` is the built-in one of int2/int4 (the row decoder then reads the digits straight from the bytes). */
export function isBuiltinIntParser(parser: Parser | undefined): boolean {
  return parser === parseNumber
}

const parseInt8: Parser = (value) => {
  const n = +value
  // Every integer outside the safe range converts to a double whose magnitude
  // is at least 2^53, so isSafeInteger alone decides whether precision is lost.
  return Number.isSafeInteger(n) ? n : BigInt(value)
}

const parseJson: Parser = (value) => JSON.parse(value)

// -1 marks a non-hex character; indexed by char code.
const HEX_VALUE = (() => {
  const table = new Int8Array(256).fill(-1)
  for (let i = 0; i < 10; i++) table[48 + i] = i
  for (let i = 0; i < 6; i++) {
    table[65 + i] = 10 + i
    table[97 + i] = 10 + i
  }
  return table
})()

function hexDigit(text: string, index: number): number {
  const code = text.charCodeAt(index)
  return code < 256 ? HEX_VALUE[code]! : -1
}

function decodeHexBytea(value: string): Uint8Array {
  const digits = value.length - 2
  if (digits % 2 !== 0) throw new SyntaxError('invalid bytea hex value: odd number of digits')
  const out = new Uint8Array(digits / 2)
  for (let i = 2, j = 0; i < value.length; i += 2, j++) {
    const hi = hexDigit(value, i)
    const lo = hexDigit(value, i + 1)
    if ((hi | lo) < 0) throw new SyntaxError(`invalid bytea hex digit at offset ${i}`)
    out[j] = (hi << 4) | lo
  }
  return out
}

// Only reached when a session switches bytea_output to 'escape': printable
// bytes appear as themselves, '\\' is a backslash and '\ooo' is an octal byte.
function decodeEscapeBytea(value: string): Uint8Array {
  const out = new Uint8Array(value.length)
  let j = 0
  for (let i = 0; i < value.length; ) {
    const code = value.charCodeAt(i)
    if (code !== 92) {
      if (code > 255) throw new SyntaxError('invalid bytea escape value: non-byte character')
      out[j++] = code
      i++
    } else if (value.charCodeAt(i + 1) === 92) {
      out[j++] = 92
      i += 2
    } else {
      const octal = value.slice(i + 1, i + 4)
      if (!/^[0-3][0-7]{2}$/.test(octal)) throw new SyntaxError('invalid bytea escape sequence')
      out[j++] = parseInt(octal, 8)
      i += 4
    }
  }
  return out.slice(0, j)
}

const parseBytea: Parser = (value) =>
  value.charCodeAt(0) === 92 && value.charCodeAt(1) === 120 ? decodeHexBytea(value) : decodeEscapeBytea(value)

// DateStyle=ISO output for date, timestamp and timestamptz. Years may exceed
// four digits, the offset may carry minutes and seconds (historic zones such
// as LMT), and BC values get a ' BC' suffix instead of a sign.
const DATETIME_RE =
  /^(\d{4,})-(\d\d)-(\d\d)(?:[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?)?( BC)?$/

/** `n` ASCII digits of `s` at `at` as a number, or -1 if one is not a digit. */
function digitsAt(s: string, at: number, n: number): number {
  let v = 0
  for (let k = 0; k < n; k++) {
    const d = s.charCodeAt(at + k) - 48
    if (d < 0 || d > 9) return -1
    v = v * 10 + d
  }
  return v
}

/**
 * Milliseconds of `YYYY-MM-DD[ HH:MM:SS[.f...][+-HH[:MM[:SS]]]]` with a year
 * from 100 to 9999 (nearly every value), read at fixed positions; NaN for
 * anything else, which then goes through {@link DATETIME_RE}. Date.UTC
 * takes years from 100 on as they are.
 */
function fastDateTime(v: string): number {
  const length = v.length
  if (length < 10 || v.charCodeAt(4) !== 45 || v.charCodeAt(7) !== 45) return NaN
  const year = digitsAt(v, 0, 4)
  const month = digitsAt(v, 5, 2)
  const day = digitsAt(v, 8, 2)
  if (year < 100 || month < 0 || day < 0) return NaN
  if (length === 10) return Date.UTC(year, month - 1, day)
  if (length < 19 || v.charCodeAt(13) !== 58 || v.charCodeAt(16) !== 58) return NaN
  const sep = v.charCodeAt(10)
  if (sep !== 32 && sep !== 84) return NaN
  const hour = digitsAt(v, 11, 2)
  const minute = digitsAt(v, 14, 2)
  const second = digitsAt(v, 17, 2)
  if (hour < 0 || minute < 0 || second < 0) return NaN
  let i = 19
  let ms = 0
  if (i < length && v.charCodeAt(i) === 46) {
    // Date has millisecond resolution; truncating matches what Date.parse does.
    let scale = 100
    for (i++; i < length; i++) {
      const d = v.charCodeAt(i) - 48
      if (d < 0 || d > 9) break
      ms += d * scale
      scale /= 10
    }
    ms = Math.floor(ms)
  }
  let offset = 0
  if (i < length) {
    const sign = v.charCodeAt(i)
    if (sign !== 43 && sign !== 45) return NaN
    const oh = digitsAt(v, i + 1, 2)
    if (oh < 0) return NaN
    offset = oh * 3600
    i += 3
    for (let unit = 60; i < length && unit >= 1; unit /= 60) {
      if (v.charCodeAt(i) !== 58) return NaN
      const part = digitsAt(v, i + 1, 2)
      if (part < 0) return NaN
      offset += part * unit
      i += 3
    }
    if (i !== length) return NaN
    if (sign === 45) offset = -offset
  }
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offset * 1000
}

const parseDateTime: Parser = (value) => {
  const fast = fastDateTime(value)
  if (fast === fast) return new Date(fast)
  if (value === 'infinity') return Infinity
  if (value === '-infinity') return -Infinity
  const m = DATETIME_RE.exec(value)
  // Another DateStyle is in effect; the platform parser is the best we have.
  if (m === null) return new Date(value)
  const [, y, mo, d, hh, mi, ss, frac, sign, oh, om, os, bc] = m
  // Astronomical numbering: 1 BC is year 0. setUTCFullYear is used because
  // Date.UTC would map years 0..99 onto 1900..1999.
  const year = bc === undefined ? +y! : 1 - +y!
  const date = new Date(0)
  date.setUTCFullYear(year, +mo! - 1, +d!)
  let ms = date.getTime()
  if (hh !== undefined) {
    // Date has millisecond resolution; truncating matches what Date.parse does.
    const fracMs = frac === undefined ? 0 : +(frac + '00').slice(0, 3)
    ms += ((+hh * 60 + +mi!) * 60 + +ss!) * 1000 + fracMs
    if (sign !== undefined) {
      const offsetSeconds = (+oh! * 60 + +(om ?? 0)) * 60 + +(os ?? 0)
      ms -= (sign === '-' ? -1 : 1) * offsetSeconds * 1000
    }
  }
  return new Date(ms)
}

const ARRAY_SPACE = new Set([32, 9, 10, 11, 12, 13])

/**
 * Parses PostgreSQL array text output such as `{1,2,NULL}` or `{{"a b"},{c}}`.
 * Elements go through `element` (with `elementTypeId`); without one they stay
 * strings. Unquoted NULL is SQL NULL, a quoted "NULL" is the text NULL.
 */
export function parseArray(
  text: string,
  element: Parser | undefined,
  elementTypeId: number,
  delimiter = ',',
): unknown[] {
  const delim = delimiter.charCodeAt(0)
  const end = text.length
  let pos = 0

  const fail = (why: string): never => {
    throw new SyntaxError(`malformed array literal (${why}): ${text}`)
  }
  const skipSpace = () => {
    while (pos < end && ARRAY_SPACE.has(text.charCodeAt(pos))) pos++
  }
  const convert = (raw: string) => (element === undefined ? raw : element(raw, elementTypeId))

  const readQuoted = (): string => {
    pos++
    let out = ''
    let start = pos
    for (;;) {
      if (pos >= end) return fail('unterminated quoted element')
      const c = text.charCodeAt(pos)
      if (c === 34) {
        out += text.slice(start, pos)
        pos++
        return out
      }
      if (c === 92) {
        out += text.slice(start, pos) + text.charAt(pos + 1)
        pos += 2
        start = pos
      } else {
        pos++
      }
    }
  }

  const readUnquoted = (): unknown => {
    let out = ''
    let start = pos
    let escaped = false
    // Trailing whitespace is insignificant unless it was backslash-escaped.
    let keep = 0
    while (pos < end) {
      const c = text.charCodeAt(pos)
      if (c === delim || c === 125) break
      if (c === 92) {
        out += text.slice(start, pos) + text.charAt(pos + 1)
        escaped = true
        pos += 2
        start = pos
        keep = out.length
      } else {
        pos++
      }
    }
    out += text.slice(start, pos)
    let stop = out.length
    while (stop > keep && ARRAY_SPACE.has(out.charCodeAt(stop - 1))) stop--
    out = out.slice(0, stop)
    if (out.length === 0 && !escaped) return fail('empty element')
    if (!escaped && out.length === 4 && out.toUpperCase() === 'NULL') return null
    return convert(out)
  }

  const readArray = (): unknown[] => {
    if (text.charCodeAt(pos) !== 123) return fail("expected '{'")
    pos++
    const items: unknown[] = []
    skipSpace()
    if (text.charCodeAt(pos) === 125) {
      pos++
      return items
    }
    for (;;) {
      skipSpace()
      const c = text.charCodeAt(pos)
      if (c === 123) items.push(readArray())
      else if (c === 34) items.push(convert(readQuoted()))
      else items.push(readUnquoted())
      skipSpace()
      const next = text.charCodeAt(pos++)
      if (next === 125) return items
      if (next !== delim) return fail(`expected '${delimiter}' or '}'`)
    }
  }

  // Arrays whose lower bound is not 1 are prefixed with their bounds, e.g.
  // '[0:1]={1,2}'. A JS array cannot represent the offset, so it is dropped.
  if (text.charCodeAt(0) === 91) {
    const eq = text.indexOf('=')
    if (eq < 0) fail('dimension decoration without =')
    pos = eq + 1
  }
  skipSpace()
  const result = readArray()
  skipSpace()
  if (pos !== end) fail('junk after closing brace')
  return result
}

export function makeArrayParser(
  elementParser: Parser | undefined,
  elementTypeId: number,
  delimiter: string = arrayDelimiter(elementTypeId),
): Parser {
  return (value) => parseArray(value, elementParser, elementTypeId, delimiter)
}

// Types without an entry (text, varchar, numeric, uuid, time, interval, ...)
// are returned as the string PostgreSQL sent; numeric deliberately so, since
// a double would lose precision.
const scalarParsers: Record<number, Parser> = {
  [OID.BOOL]: parseBool,
  [OID.INT2]: parseNumber,
  [OID.INT4]: parseNumber,
  [OID.OID]: parseNumber,
  [OID.FLOAT4]: parseNumber,
  [OID.FLOAT8]: parseNumber,
  [OID.INT8]: parseInt8,
  [OID.JSON]: parseJson,
  [OID.JSONB]: parseJson,
  [OID.BYTEA]: parseBytea,
  [OID.DATE]: parseDateTime,
  [OID.TIMESTAMP]: parseDateTime,
  [OID.TIMESTAMPTZ]: parseDateTime,
}

export const defaultParsers: Record<number, Parser> = { ...scalarParsers }
for (const [arrayOid, elementOid] of Object.entries(ARRAY_OF)) {
  defaultParsers[Number(arrayOid)] = makeArrayParser(scalarParsers[elementOid], elementOid)
}

export function parseValue(value: string | null, typeId: number, parsers: Record<number, Parser>): unknown {
  if (value === null) return null
  const parser = parsers[typeId]
  return parser === undefined ? value : parser(value, typeId)
}
