/**
 * The `types` namespace of `@electric-sql/pglite` (`import { types } from ...`):
 * type OID constants, parser and serializer tables keyed by OID and by JS
 * type name, `parseType`, and the array helpers. drizzle-orm's `pglite`
 * driver imports it to pass its own parsers. Every function here is ours
 * (`types/`), so values parse the same way as in `query()` results: arrays
 * of built-in types parse to JS arrays, and int8 beyond 2^53 to a bigint
 * instead of losing digits.
 */
import { ARRAY_OF, OID as BUILTIN, arrayDelimiter, defaultParsers, defaultSerializers, parseArray, serializeArray } from './types/index.js'
import type { Parser, Serializer } from './types/index.js'

// Built-in type OIDs, fixed in PostgreSQL's pg_type.dat. PGlite also exports
// ABSTIME, RELTIME and TINTERVAL, which PostgreSQL 12 removed; they are kept
// so that code naming them still loads. `JSON` shadows the global in
// this module only: the name is PGlite's.
export const BOOL = BUILTIN.BOOL
export const BYTEA = BUILTIN.BYTEA
export const CHAR = BUILTIN.CHAR
export const INT8 = BUILTIN.INT8
export const INT2 = BUILTIN.INT2
export const INT4 = BUILTIN.INT4
export const REGPROC = BUILTIN.REGPROC
export const TEXT = BUILTIN.TEXT
export const OID = BUILTIN.OID
export const TID = BUILTIN.TID
export const XID = BUILTIN.XID
export const CID = BUILTIN.CID
export const JSON = BUILTIN.JSON
export const XML = BUILTIN.XML
export const PG_NODE_TREE = 194
export const SMGR = 210
export const PATH = BUILTIN.PATH
export const POLYGON = BUILTIN.POLYGON
export const CIDR = BUILTIN.CIDR
export const FLOAT4 = BUILTIN.FLOAT4
export const FLOAT8 = BUILTIN.FLOAT8
export const ABSTIME = 702
export const RELTIME = 703
export const TINTERVAL = 704
export const CIRCLE = BUILTIN.CIRCLE
export const MACADDR8 = BUILTIN.MACADDR8
export const MONEY = BUILTIN.MONEY
export const MACADDR = BUILTIN.MACADDR
export const INET = BUILTIN.INET
export const ACLITEM = BUILTIN.ACLITEM
export const BPCHAR = BUILTIN.BPCHAR
export const VARCHAR = BUILTIN.VARCHAR
export const DATE = BUILTIN.DATE
export const TIME = BUILTIN.TIME
export const TIMESTAMP = BUILTIN.TIMESTAMP
export const TIMESTAMPTZ = BUILTIN.TIMESTAMPTZ
export const INTERVAL = BUILTIN.INTERVAL
export const TIMETZ = BUILTIN.TIMETZ
export const BIT = BUILTIN.BIT
export const VARBIT = BUILTIN.VARBIT
export const NUMERIC = BUILTIN.NUMERIC
export const REFCURSOR = BUILTIN.REFCURSOR
export const REGPROCEDURE = 2202
export const REGOPER = 2203
export const REGOPERATOR = 2204
export const REGCLASS = BUILTIN.REGCLASS
export const REGTYPE = BUILTIN.REGTYPE
export const UUID = BUILTIN.UUID
export const TXID_SNAPSHOT = 2970
export const PG_LSN = BUILTIN.PG_LSN
export const PG_NDISTINCT = 3361
export const PG_DEPENDENCIES = 3402
export const TSVECTOR = BUILTIN.TSVECTOR
export const TSQUERY = BUILTIN.TSQUERY
export const GTSVECTOR = 3642
export const REGCONFIG = 3734
export const REGDICTIONARY = 3769
export const JSONB = BUILTIN.JSONB
export const REGNAMESPACE = 4089
export const REGROLE = 4096

/** How one JS type is sent (`to`, the parameter OID; 0 lets the server infer) and read back (`from`). */
export interface TypeHandler {
  readonly to: number
  readonly from: readonly number[]
  readonly serialize: Serializer
  readonly parse: Parser
}

const asText: Parser = (value) => value

/** The JS types and the OIDs each maps to, as PGlite's `types.types`. */
export const types: Readonly<Record<'string' | 'number' | 'bigint' | 'json' | 'boolean' | 'date' | 'bytea', TypeHandler>> = Object.freeze({
  string: { to: TEXT, from: [TEXT, VARCHAR, BPCHAR], serialize: defaultSerializers[TEXT]!, parse: asText },
  number: { to: 0, from: [INT2, INT4, OID, FLOAT4, FLOAT8], serialize: defaultSerializers[INT4]!, parse: defaultParsers[INT4]! },
  bigint: { to: INT8, from: [INT8], serialize: defaultSerializers[INT8]!, parse: defaultParsers[INT8]! },
  json: { to: JSON, from: [JSON, JSONB], serialize: defaultSerializers[JSON]!, parse: defaultParsers[JSON]! },
  boolean: { to: BOOL, from: [BOOL], serialize: defaultSerializers[BOOL]!, parse: defaultParsers[BOOL]! },
  date: { to: TIMESTAMPTZ, from: [DATE, TIMESTAMP, TIMESTAMPTZ], serialize: defaultSerializers[TIMESTAMPTZ]!, parse: defaultParsers[TIMESTAMPTZ]! },
  bytea: { to: BYTEA, from: [BYTEA], serialize: defaultSerializers[BYTEA]!, parse: defaultParsers[BYTEA]! },
})

/**
 * Parsers by type OID (every built-in type with a parser, arrays included)
 * and by JS type name (`parsers.json`, ...). A copy: changing it changes
 * nothing else.
 */
export const parsers: Record<number | string, Parser> = { ...defaultParsers }
/**
 * Serializers by parameter type OID, plus `0` (a number whose type the
 * server infers) and the JS type names. A copy, like {@link parsers}.
 */
export const serializers: Record<number | string, Serializer> = { ...defaultSerializers, 0: types.number.serialize }
for (const [name, handler] of Object.entries(types)) {
  parsers[name] = handler.parse
  serializers[name] = handler.serialize
}

/**
 * Parses one value in text format as `query()` would: by `parsers[type]`
 * when given, else the built-in parser of that OID; a type without one
 * stays a string, and SQL NULL (`null`) stays `null`.
 */
export function parseType(x: string | null, type: number, parsers?: Readonly<Record<number, Parser>>): unknown {
  if (x === null) return null
  const parser = parsers?.[type] ?? defaultParsers[type]
  return parser === undefined ? x : parser(x, type)
}

/**
 * Parses array text (`{1,2,NULL}`, nested or with bounds) of the array type
 * `typarray`, each element through `parser`.
 * @throws {SyntaxError} when `x` is not an array literal.
 */
export function arrayParser(x: string, parser: Parser | undefined, typarray: number): unknown[] {
  const element = ARRAY_OF[typarray] ?? 0
  return parseArray(x, parser, element, arrayDelimiter(element))
}

/**
 * Writes a JS array (nested arrays for more dimensions) as array text of
 * the array type `typarray`, each non-null element through `serializer`.
 */
export function arraySerializer(xs: readonly unknown[], serializer: Serializer | undefined, typarray: number): string {
  return serializeArray(xs, serializer, arrayDelimiter(ARRAY_OF[typarray] ?? 0))
}
