import { ARRAY_OF, OID, arrayDelimiter } from './oids.js'

/**
 * Converts a non-null JS value to PostgreSQL text input for one parameter
 * type. Callers send null/undefined as SQL NULL without calling it.
 */
export type Serializer = (value: unknown) => string

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'bigint') return `${value}n`
  if (value instanceof Date) return `Date(${value.getTime()})`
  if (typeof value === 'object' && value !== null) return Object.prototype.toString.call(value)
  return String(value)
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0')
}

// toISOString() is what PostgreSQL's input functions expect, except outside
// years 1..9999 where it switches to '+010000'/'-000001' forms that
// PostgreSQL rejects; those are spelled with more digits or a ' BC' suffix.
function formatDate(date: Date): string {
  const time = date.getTime()
  if (Number.isNaN(time)) throw new TypeError('Invalid Date cannot be sent to PostgreSQL')
  const year = date.getUTCFullYear()
  if (year >= 1 && year <= 9999) return date.toISOString()
  const bc = year <= 0
  return (
    `${pad(bc ? 1 - year : year, 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)} ` +
    `${pad(date.getUTCHours(), 2)}:${pad(date.getUTCMinutes(), 2)}:${pad(date.getUTCSeconds(), 2)}.` +
    `${pad(date.getUTCMilliseconds(), 3)}+00${bc ? ' BC' : ''}`
  )
}

function jsonReplacer(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value
}

function toJson(value: unknown): string {
  const json = JSON.stringify(value, jsonReplacer)
  // JSON.stringify yields undefined for functions, symbols and undefined.
  if (json === undefined) throw new TypeError(`Cannot serialize ${describe(value)} as JSON`)
  return json
}

const HEX_PAIRS: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))
const HEX_CODES = new TextEncoder().encode('0123456789abcdef')
const asciiDecoder = new TextDecoder()

// Small buffers are cheapest as string concatenation; big ones are encoded
// into an ASCII byte buffer and decoded once to avoid building a huge rope.
function bytesToHex(bytes: Uint8Array): string {
  const n = bytes.length
  if (n < 512) {
    let out = '\\x'
    for (let i = 0; i < n; i++) out += HEX_PAIRS[bytes[i]!]
    return out
  }
  const out = new Uint8Array(2 + n * 2)
  out[0] = 92
  out[1] = 120
  for (let i = 0, j = 2; i < n; i++, j += 2) {
    const b = bytes[i]!
    out[j] = HEX_CODES[b >> 4]!
    out[j + 1] = HEX_CODES[b & 15]!
  }
  return asciiDecoder.decode(out)
}

const serializeText: Serializer = (value) => (value instanceof Date ? formatDate(value) : String(value))

const serializeNumber: Serializer = (value) => String(value)

const serializeJson: Serializer = (value) => (typeof value === 'string' ? value : toJson(value))

const TRUE_WORDS = new Set(['true', 't', 'yes', 'y', 'on', '1'])
const FALSE_WORDS = new Set(['false', 'f', 'no', 'n', 'off', '0'])

const serializeBool: Serializer = (value) => {
  if (value === true || value === 1) return 't'
  if (value === false || value === 0) return 'f'
  if (typeof value === 'string') {
    const word = value.trim().toLowerCase()
    if (TRUE_WORDS.has(word)) return 't'
    if (FALSE_WORDS.has(word)) return 'f'
  }
  throw new TypeError(`Invalid input for boolean type: ${describe(value)}`)
}

const serializeDateTime: Serializer = (value) => {
  if (typeof value === 'string') return value
  if (value === Infinity) return 'infinity'
  if (value === -Infinity) return '-infinity'
  if (typeof value === 'number') return formatDate(new Date(value))
  if (value instanceof Date) return formatDate(value)
  throw new TypeError(`Invalid input for date/time type: ${describe(value)}`)
}

const serializeBytea: Serializer = (value) => {
  if (value instanceof Uint8Array) return bytesToHex(value)
  throw new TypeError(`Invalid input for bytea type: expected Uint8Array, got ${describe(value)}`)
}

function quoteElement(text: string): string {
  return /["\\]/.test(text) ? `"${text.replace(/["\\]/g, '\\$&')}"` : `"${text}"`
}

// Element conversion for arrays whose element type is unknown: the same
// choices serializeByValue makes, except bytes must become text here.
const serializeUnknownElement: Serializer = (value) => {
  const out = serializeByValue(value)
  if (out === null) return 'NULL'
  return typeof out === 'string' ? out : bytesToHex(out)
}

/**
 * Builds a PostgreSQL array literal. Every non-null element is quoted, so the
 * element text never needs inspecting for delimiters, braces or NULL.
 */
export function serializeArray(value: readonly unknown[], element: Serializer | undefined, delimiter = ','): string {
  const toText = element ?? serializeUnknownElement
  const write = (items: readonly unknown[]): string => {
    let out = '{'
    for (let i = 0; i < items.length; i++) {
      if (i > 0) out += delimiter
      const item = items[i]
      if (item === null || item === undefined) out += 'NULL'
      else if (Array.isArray(item)) out += write(item)
      else out += quoteElement(toText(item))
    }
    return out + '}'
  }
  return write(value)
}

function makeArraySerializer(element: Serializer | undefined, delimiter: string): Serializer {
  return (value) => {
    if (Array.isArray(value)) return serializeArray(value, element, delimiter)
    // A string is taken to be an array literal the caller wrote already.
    if (typeof value === 'string') return value
    throw new TypeError(`Invalid input for array type: expected an array, got ${describe(value)}`)
  }
}

const scalarSerializers: Record<number, Serializer> = {
  [OID.TEXT]: serializeText,
  [OID.VARCHAR]: serializeText,
  [OID.BPCHAR]: serializeText,
  [OID.NAME]: serializeText,
  [OID.CHAR]: serializeText,
  [OID.UUID]: serializeText,
  [OID.XML]: serializeText,
  [OID.INT2]: serializeNumber,
  [OID.INT4]: serializeNumber,
  [OID.INT8]: serializeNumber,
  [OID.OID]: serializeNumber,
  [OID.FLOAT4]: serializeNumber,
  [OID.FLOAT8]: serializeNumber,
  [OID.NUMERIC]: serializeNumber,
  [OID.JSON]: serializeJson,
  [OID.JSONB]: serializeJson,
  [OID.BOOL]: serializeBool,
  [OID.DATE]: serializeDateTime,
  [OID.TIMESTAMP]: serializeDateTime,
  [OID.TIMESTAMPTZ]: serializeDateTime,
  [OID.BYTEA]: serializeBytea,
}

export const defaultSerializers: Record<number, Serializer> = { ...scalarSerializers }
for (const [arrayOid, elementOid] of Object.entries(ARRAY_OF)) {
  defaultSerializers[Number(arrayOid)] = makeArraySerializer(scalarSerializers[elementOid], arrayDelimiter(elementOid))
}

function isPlainObject(value: unknown): value is object {
  if (typeof value !== 'object' || value === null) return false
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * Serializes a parameter whose type the server will infer. Bytes come back as
 * a Uint8Array so the caller can send them in binary format, which the server
 * accepts for bytea without a declared type.
 */
export function serializeByValue(value: unknown): string | Uint8Array | null {
  if (value === null || value === undefined) return null
  switch (typeof value) {
    case 'string':
      return value
    case 'number':
    case 'bigint':
      return String(value)
    // 'true'/'false' are valid input for both bool and json.
    case 'boolean':
      return value ? 'true' : 'false'
    case 'symbol':
    case 'function':
      throw new TypeError(`Cannot send ${describe(value)} as a query parameter`)
  }
  if (value instanceof Date) return formatDate(value)
  if (value instanceof Uint8Array) return value
  if (value instanceof ArrayBuffer) return new Uint8Array(value)
  // Other typed arrays and DataViews are sent as their raw bytes; their JSON
  // form ({"0":..}) would never be what was meant.
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
  if (Array.isArray(value)) return serializeArray(value, serializeUnknownElement)
  return toJson(value)
}

/**
 * True when some value's text form depends on the parameter's actual type
 * (a JS array may target an array column or json; an object targets json),
 * so the statement's parameter types must be described before serializing.
 */
export function needsParamTypes(values: readonly unknown[]): boolean {
  for (const value of values) {
    if (Array.isArray(value) || isPlainObject(value)) return true
  }
  return false
}
