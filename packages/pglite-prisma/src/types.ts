/**
 * Value conversion between Prisma's query engine and pgwasm: which
 * `ColumnType` a result column has, how result text becomes the values the
 * engine expects, and how the engine's arguments become query parameters.
 *
 * The engine's expectations are those `@prisma/adapter-pg` meets with `pg`:
 * int8 as text (it builds BigInt itself), JSON as its text, timestamps as
 * ISO-8601 text with an offset, dates and times as text, bytea as bytes.
 */
import { ColumnTypeEnum, DriverAdapterError, type ArgType, type ColumnType } from '@prisma/driver-adapter-utils'
import { OID, parsers as defaultParsers, type Field, type PGliteOptions, type Parser } from '@pgwasm/pglite'

/** Array type OIDs used here (pg_type.dat); the core's `OID` table holds scalars only. */
const ARRAY = {
  BOOL: 1000,
  BYTEA: 1001,
  CHAR: 1002,
  NAME: 1003,
  INT2: 1005,
  INT4: 1007,
  TEXT: 1009,
  BPCHAR: 1014,
  VARCHAR: 1015,
  INT8: 1016,
  FLOAT4: 1021,
  FLOAT8: 1022,
  OID: 1028,
  INET: 1041,
  TIMESTAMP: 1115,
  DATE: 1182,
  TIME: 1183,
  TIMESTAMPTZ: 1185,
  NUMERIC: 1231,
  TIMETZ: 1270,
  BIT: 1561,
  VARBIT: 1563,
  XML: 143,
  JSON: 199,
  CIDR: 651,
  MONEY: 791,
  UUID: 2951,
  JSONB: 3807,
} as const

/** Types created by users (enums, domains, composite types) start here. */
const FIRST_NORMAL_OBJECT_ID = 16384

const COLUMN_TYPES = new Map<number, ColumnType>([
  [OID.INT2, ColumnTypeEnum.Int32],
  [OID.INT4, ColumnTypeEnum.Int32],
  [OID.INT8, ColumnTypeEnum.Int64],
  [OID.OID, ColumnTypeEnum.Int64],
  [OID.FLOAT4, ColumnTypeEnum.Float],
  [OID.FLOAT8, ColumnTypeEnum.Double],
  [OID.BOOL, ColumnTypeEnum.Boolean],
  [OID.DATE, ColumnTypeEnum.Date],
  [OID.TIME, ColumnTypeEnum.Time],
  [OID.TIMETZ, ColumnTypeEnum.Time],
  [OID.TIMESTAMP, ColumnTypeEnum.DateTime],
  [OID.TIMESTAMPTZ, ColumnTypeEnum.DateTime],
  [OID.NUMERIC, ColumnTypeEnum.Numeric],
  [OID.MONEY, ColumnTypeEnum.Numeric],
  [OID.JSON, ColumnTypeEnum.Json],
  [OID.JSONB, ColumnTypeEnum.Json],
  [OID.UUID, ColumnTypeEnum.Uuid],
  [OID.BPCHAR, ColumnTypeEnum.Text],
  [OID.TEXT, ColumnTypeEnum.Text],
  [OID.VARCHAR, ColumnTypeEnum.Text],
  [OID.NAME, ColumnTypeEnum.Text],
  [OID.CHAR, ColumnTypeEnum.Text],
  [OID.BIT, ColumnTypeEnum.Text],
  [OID.VARBIT, ColumnTypeEnum.Text],
  [OID.INET, ColumnTypeEnum.Text],
  [OID.CIDR, ColumnTypeEnum.Text],
  [OID.XML, ColumnTypeEnum.Text],
  [OID.BYTEA, ColumnTypeEnum.Bytes],
  [ARRAY.INT2, ColumnTypeEnum.Int32Array],
  [ARRAY.INT4, ColumnTypeEnum.Int32Array],
  [ARRAY.INT8, ColumnTypeEnum.Int64Array],
  [ARRAY.OID, ColumnTypeEnum.Int64Array],
  [ARRAY.FLOAT4, ColumnTypeEnum.FloatArray],
  [ARRAY.FLOAT8, ColumnTypeEnum.DoubleArray],
  [ARRAY.NUMERIC, ColumnTypeEnum.NumericArray],
  [ARRAY.MONEY, ColumnTypeEnum.NumericArray],
  [ARRAY.BOOL, ColumnTypeEnum.BooleanArray],
  [ARRAY.CHAR, ColumnTypeEnum.CharacterArray],
  [ARRAY.BPCHAR, ColumnTypeEnum.TextArray],
  [ARRAY.TEXT, ColumnTypeEnum.TextArray],
  [ARRAY.VARCHAR, ColumnTypeEnum.TextArray],
  [ARRAY.NAME, ColumnTypeEnum.TextArray],
  [ARRAY.BIT, ColumnTypeEnum.TextArray],
  [ARRAY.VARBIT, ColumnTypeEnum.TextArray],
  [ARRAY.INET, ColumnTypeEnum.TextArray],
  [ARRAY.CIDR, ColumnTypeEnum.TextArray],
  [ARRAY.XML, ColumnTypeEnum.TextArray],
  [ARRAY.DATE, ColumnTypeEnum.DateArray],
  [ARRAY.TIME, ColumnTypeEnum.TimeArray],
  [ARRAY.TIMETZ, ColumnTypeEnum.TimeArray],
  [ARRAY.TIMESTAMP, ColumnTypeEnum.DateTimeArray],
  [ARRAY.TIMESTAMPTZ, ColumnTypeEnum.DateTimeArray],
  [ARRAY.JSON, ColumnTypeEnum.JsonArray],
  [ARRAY.JSONB, ColumnTypeEnum.JsonArray],
  [ARRAY.BYTEA, ColumnTypeEnum.BytesArray],
  [ARRAY.UUID, ColumnTypeEnum.UuidArray],
])

/** Built-in type names by OID, for the error about a column type Prisma cannot read. */
const TYPE_NAMES = new Map<number, string>(Object.entries(OID).map(([name, oid]) => [oid, name.toLowerCase()]))

/**
 * The Prisma column type of a result column.
 * @throws {DriverAdapterError} `UnsupportedNativeDataType` for a built-in type Prisma has no mapping for.
 */
export function columnTypeOf(typeId: number): ColumnType {
  const type = COLUMN_TYPES.get(typeId)
  if (type !== undefined) return type
  // Enums and other user-defined types arrive as their text form.
  if (typeId >= FIRST_NORMAL_OBJECT_ID) return ColumnTypeEnum.Text
  throw new DriverAdapterError({ kind: 'UnsupportedNativeDataType', type: TYPE_NAMES.get(typeId) ?? `oid ${typeId}` })
}

/** Turns one value, as the instance's default parsers made it, into what Prisma reads. */
type Convert = (value: unknown) => unknown

/** int8 arrives as a number or BigInt; Prisma builds its BigInt from the text. */
const int8Text: Convert = (value) => (typeof value === 'string' ? value : String(value))

/** json/jsonb arrive parsed; Prisma parses the text itself (same values: it is the same JSON.parse). */
const jsonText: Convert = (value) => JSON.stringify(value)

function dateOf(value: unknown): Date | undefined {
  return value instanceof Date && !Number.isNaN(value.getTime()) ? value : undefined
}

/** timestamp and timestamptz arrive as Date (timestamp taken as UTC); Prisma reads ISO-8601. */
const isoTimestamp: Convert = (value) => {
  const date = dateOf(value)
  if (date) return date.toISOString()
  if (value === Infinity) return 'infinity'
  if (value === -Infinity) return '-infinity'
  return value
}

/** date arrives as a Date at UTC midnight; Prisma reads `YYYY-MM-DD`. */
const isoDate: Convert = (value) => {
  const date = dateOf(value)
  if (!date) return isoTimestamp(value)
  const year = date.getUTCFullYear()
  return year >= 0 && year <= 9999 ? date.toISOString().slice(0, 10) : date.toISOString()
}

/** A timetz without its offset: Prisma's Time values carry none. */
const stripTimeOffset: Convert = (value) => {
  if (typeof value !== 'string') return value
  const sign = Math.max(value.lastIndexOf('+'), value.lastIndexOf('-'))
  return sign > 0 ? value.slice(0, sign) : value
}

/** money prints with a currency symbol; Prisma reads it as a decimal. */
const stripCurrency: Convert = (value) => (typeof value === 'string' ? value.replace(/[^0-9.\-]/g, '') : value)

function each(convert: Convert): Convert {
  const walk: Convert = (value) => (Array.isArray(value) ? value.map(walk) : value === null ? null : convert(value))
  return walk
}

/**
 * The result types whose pgwasm default value (number/BigInt, Date, parsed
 * JSON) is not what Prisma's engine reads. Converting after the fact keeps
 * the query on the instance's own parsers: a per-query `parsers` option
 * costs a merge of every parser of the instance on each call.
 */
const CONVERTERS = new Map<number, Convert>([
  [OID.INT8, int8Text],
  [OID.JSON, jsonText],
  [OID.JSONB, jsonText],
  [OID.DATE, isoDate],
  [OID.TIMESTAMP, isoTimestamp],
  [OID.TIMESTAMPTZ, isoTimestamp],
  [OID.TIMETZ, stripTimeOffset],
  [OID.MONEY, stripCurrency],
  [ARRAY.INT8, each(int8Text)],
  [ARRAY.JSON, each(jsonText)],
  [ARRAY.JSONB, each(jsonText)],
  [ARRAY.DATE, each(isoDate)],
  [ARRAY.TIMESTAMP, each(isoTimestamp)],
  [ARRAY.TIMESTAMPTZ, each(isoTimestamp)],
  [ARRAY.TIMETZ, each(stripTimeOffset)],
  [ARRAY.MONEY, each(stripCurrency)],
])

/** `2024-01-02 03:04:05.678` (a timestamp without zone, taken as UTC) as ISO-8601 with an offset. */
function timestampText(text: string): string {
  // Postgres prints `YYYY-MM-DD HH:MM:SS[.ffffff]`; a slice beats a search.
  if (text.length >= 19 && text.charCodeAt(10) === 0x20) return `${text.slice(0, 10)}T${text.slice(11)}+00:00`
  if (text === 'infinity' || text === '-infinity') return text
  return `${text.replace(' ', 'T')}+00:00`
}

/**
 * A timestamptz as ISO-8601. The common case (session zone UTC) is a string
 * edit; another offset goes through Date, so the instant is right whatever
 * the session's TimeZone is.
 */
function timestamptzText(text: string): string {
  if (text.endsWith('+00')) return `${text.replace(' ', 'T')}:00`
  if (text === 'infinity' || text === '-infinity') return text
  const date = new Date(text.replace(' ', 'T'))
  return Number.isNaN(date.getTime()) ? text : date.toISOString()
}

const keepText: Parser = (text) => text
/** The core's parser of text[]: splits an array literal into strings. */
const textArray: Parser = defaultParsers[ARRAY.TEXT]!

function textArrayOf(convert: (text: string) => unknown): Parser {
  const walk = (value: unknown): unknown => (Array.isArray(value) ? value.map(walk) : typeof value === 'string' ? convert(value) : value)
  return (text, typeId) => walk(textArray(text, typeId))
}

/**
 * Parsers that produce what Prisma's engine reads straight from the result
 * text, for an instance that serves Prisma: `PGlite.create({ parsers: prismaParsers })`.
 * The adapter then converts nothing after the query (faster than the
 * default parsers, whose Date and parsed-JSON values it must turn back into
 * text). `db.query()` on such an instance returns int8, json/jsonb, date
 * and timestamps as text.
 */
export const prismaParsers: Readonly<Record<number, Parser>> = Object.freeze({
  [OID.INT8]: keepText,
  [OID.JSON]: keepText,
  [OID.JSONB]: keepText,
  [OID.DATE]: keepText,
  [OID.TIMESTAMP]: (text: string) => timestampText(text),
  [OID.TIMESTAMPTZ]: (text: string) => timestamptzText(text),
  [OID.TIMETZ]: (text: string) => stripTimeOffset(text),
  [OID.MONEY]: (text: string) => stripCurrency(text),
  [ARRAY.INT8]: textArray,
  [ARRAY.JSON]: textArray,
  [ARRAY.JSONB]: textArray,
  [ARRAY.DATE]: textArray,
  [ARRAY.TIMESTAMP]: textArrayOf(timestampText),
  [ARRAY.TIMESTAMPTZ]: textArrayOf(timestamptzText),
  [ARRAY.TIMETZ]: textArrayOf((t) => stripTimeOffset(t)),
  [ARRAY.MONEY]: textArrayOf((t) => stripCurrency(t)),
})

/**
 * Options for an instance that serves Prisma: `PGlite.create({ ...prismaOptions, dataDir })`.
 *
 * - `parsers`: {@link prismaParsers}, so the adapter converts nothing.
 * - `plan_cache_mode = force_generic_plan`: Prisma's statements carry
 *   `LIMIT $n OFFSET $m` parameters, for which PostgreSQL's default (`auto`)
 *   keeps planning every execution anew; one generic plan per prepared
 *   statement halves a primary-key lookup. A generic plan ignores the
 *   parameters' values, which can pick a worse plan on strongly skewed data.
 */
export const prismaOptions: Readonly<Pick<PGliteOptions, 'parsers' | 'postgresqlConf'>> = Object.freeze({
  parsers: prismaParsers,
  postgresqlConf: { plan_cache_mode: 'force_generic_plan' },
})

/**
 * How a result column's values must be converted, given the parser the
 * instance has for its type: the core's default parser's output is
 * converted; {@link prismaParsers}' output is already right; a parser of
 * the user's own is taken to know what it does.
 */
function converterFor(typeId: number, parsers: Readonly<Record<number, Parser>>): Convert | undefined {
  const convert = CONVERTERS.get(typeId)
  if (convert === undefined) return undefined
  return parsers[typeId] === defaultParsers[typeId] ? convert : undefined
}

/** Converts a value of a result column of type `typeId` from pgwasm's default form to Prisma's. */
export function toPrismaValue(value: unknown, typeId: number): unknown {
  if (value === null) return null
  const convert = CONVERTERS.get(typeId)
  return convert ? convert(value) : value
}

/** Column names, Prisma types and the conversions of one result shape. */
export interface ColumnInfo {
  readonly names: string[]
  readonly types: ColumnType[]
  /** Indexes of the columns that need converting, and how. */
  readonly converted: readonly (readonly [number, Convert])[]
}

// A cached prepared statement hands back the same `fields` array on every
// execution, so its column info is computed once per statement.
const columnInfoCache = new WeakMap<readonly Field[], ColumnInfo>()

/**
 * Column names, Prisma types and conversions of a result's fields, given
 * the parsers of the instance that produced it (memoized per fields array:
 * a fields array belongs to one statement of one instance).
 */
export function columnInfoOf(fields: readonly Field[], parsers: Readonly<Record<number, Parser>>): ColumnInfo {
  let info = columnInfoCache.get(fields)
  if (info === undefined) {
    const names = new Array<string>(fields.length)
    const types = new Array<ColumnType>(fields.length)
    const converted: [number, Convert][] = []
    for (let i = 0; i < fields.length; i++) {
      const typeId = fields[i]!.dataTypeID
      names[i] = fields[i]!.name
      types[i] = columnTypeOf(typeId)
      const convert = converterFor(typeId, parsers)
      if (convert) converted.push([i, convert])
    }
    info = { names, types, converted }
    columnInfoCache.set(fields, info)
  }
  return info
}

/** Converts rows in place (they are fresh arrays of this call) to the values Prisma reads. */
export function convertRows(rows: unknown[][], info: ColumnInfo): void {
  const converted = info.converted
  if (converted.length === 0) return
  for (const row of rows) {
    for (const [index, convert] of converted) {
      const value = row[index]
      if (value !== null && value !== undefined) row[index] = convert(value)
    }
  }
}

/** A parameter as the core sends it: text, bytes (binary format) or NULL. */
export type DbParam = string | number | bigint | boolean | Uint8Array | Date | null

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0')
}

function toDate(value: unknown): Date | undefined {
  if (value instanceof Date) return value
  if (typeof value === 'string' || typeof value === 'number') {
    const date = new Date(value)
    return Number.isNaN(date.getTime()) ? undefined : date
  }
  return undefined
}

function formatDate(date: Date): string {
  return `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`
}

function formatTime(date: Date): string {
  const ms = date.getUTCMilliseconds()
  return `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}${ms ? `.${pad(ms, 3)}` : ''}`
}

function toBytes(value: unknown): Uint8Array | undefined {
  if (value instanceof Uint8Array) return value
  if (typeof value === 'string') return Buffer.from(value, 'base64')
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
  if (value instanceof ArrayBuffer) return new Uint8Array(value)
  return undefined
}

/** One scalar argument converted for its Prisma type; `undefined` leaves it as given. */
function scalarParam(value: unknown, type: ArgType): DbParam | undefined {
  switch (type.scalarType) {
    case 'datetime': {
      // Date and time columns take the UTC parts Prisma means; timestamps
      // take ISO-8601 as is (a zone suffix is ignored by `timestamp` and
      // honoured by `timestamptz`, both right for a UTC instant).
      const dbType = type.dbType
      if (dbType === 'DATE' || dbType === 'TIME' || dbType === 'TIMETZ') {
        const date = toDate(value)
        if (date) return dbType === 'DATE' ? formatDate(date) : formatTime(date)
      }
      return value instanceof Date || typeof value === 'string' ? value : undefined
    }
    case 'bytes':
      return toBytes(value)
    case 'json':
      return typeof value === 'string' ? value : JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))
    case 'decimal':
    case 'bigint':
      // A Decimal.js object must go as its digits, not as JSON.
      return typeof value === 'object' ? String(value) : undefined
    default:
      return undefined
  }
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))

/** The text of one array element (before quoting). */
function elementText(value: unknown, type: ArgType): string {
  const converted = scalarParam(value, type) ?? value
  if (converted instanceof Uint8Array) {
    let out = '\\x'
    for (let i = 0; i < converted.length; i++) out += HEX[converted[i]!]
    return out
  }
  if (converted instanceof Date) return converted.toISOString()
  if (typeof converted === 'boolean') return converted ? 't' : 'f'
  if (typeof converted === 'object') return JSON.stringify(converted)
  return String(converted)
}

/**
 * A list argument as an array literal. Every element is quoted, so its text
 * never needs inspecting for commas, braces or the word NULL.
 */
function arrayLiteral(values: readonly unknown[], type: ArgType): string {
  let out = '{'
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ','
    const item = values[i]
    if (item === null || item === undefined) out += 'NULL'
    else if (Array.isArray(item)) out += arrayLiteral(item, type)
    else out += `"${elementText(item, type).replace(/["\\]/g, '\\$&')}"`
  }
  return out + '}'
}

/**
 * Converts Prisma's arguments to parameters the core sends without asking
 * the server for parameter types first: lists become array literals, bytes
 * become Uint8Array, JSON becomes text.
 */
export function toParams(args: readonly unknown[], argTypes: readonly ArgType[]): DbParam[] {
  const out = new Array<DbParam>(args.length)
  for (let i = 0; i < args.length; i++) {
    const value = args[i]
    const type = argTypes[i]
    if (value === null || value === undefined) {
      out[i] = null
    } else if (type === undefined) {
      out[i] = Array.isArray(value) ? arrayLiteral(value, { scalarType: 'unknown', arity: 'list' }) : (value as DbParam)
    } else if (Array.isArray(value) && type.scalarType !== 'json') {
      out[i] = arrayLiteral(value, type)
    } else {
      const converted = scalarParam(value, type)
      out[i] = converted === undefined ? (value as DbParam) : converted
    }
  }
  return out
}
