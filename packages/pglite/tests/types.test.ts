import { describe, it, expect } from 'vitest'
import {
  ARRAY_OF,
  OID,
  defaultParsers,
  defaultSerializers,
  makeArrayParser,
  needsParamTypes,
  parseArray,
  parseValue,
  serializeArray,
  serializeByValue,
  type Parser,
  type Serializer,
} from '../src/types/index.js'

function parser(typeId: number): Parser {
  const p = defaultParsers[typeId]
  if (p === undefined) throw new Error(`no parser for ${typeId}`)
  return p
}

function serializer(typeId: number): Serializer {
  const s = defaultSerializers[typeId]
  if (s === undefined) throw new Error(`no serializer for ${typeId}`)
  return s
}

const parse = (value: string, typeId: number) => parser(typeId)(value, typeId)
const serialize = (value: unknown, typeId: number) => serializer(typeId)(value)

function withTimeZone(tz: string, fn: () => void): void {
  const saved = process.env.TZ
  process.env.TZ = tz
  try {
    fn()
  } finally {
    if (saved === undefined) delete process.env.TZ
    else process.env.TZ = saved
  }
}

describe('OIDs', () => {
  it('uses the pg_type.dat OIDs for scalar types', () => {
    expect(OID).toMatchObject({
      BOOL: 16, BYTEA: 17, CHAR: 18, NAME: 19, INT8: 20, INT2: 21, INT4: 23, TEXT: 25, OID: 26,
      JSON: 114, XML: 142, FLOAT4: 700, FLOAT8: 701, BPCHAR: 1042, VARCHAR: 1043, DATE: 1082,
      TIME: 1083, TIMESTAMP: 1114, TIMESTAMPTZ: 1184, INTERVAL: 1186, TIMETZ: 1266, NUMERIC: 1700,
      UUID: 2950, JSONB: 3802,
    })
  })

  it('maps the pg_type.dat array OIDs to their element OIDs', () => {
    expect(ARRAY_OF).toMatchObject({
      1000: 16, 1001: 17, 1002: 18, 1003: 19, 1005: 21, 1007: 23, 1009: 25, 1014: 1042, 1015: 1043,
      1016: 20, 1021: 700, 1022: 701, 1028: 26, 1115: 1114, 1182: 1082, 1183: 1083, 1185: 1184,
      1187: 1186, 1231: 1700, 1270: 1266, 2951: 2950, 199: 114, 3807: 3802, 143: 142, 1020: 603,
    })
  })

  it('registers a parser and a serializer for every array type', () => {
    for (const arrayOid of Object.keys(ARRAY_OF).map(Number)) {
      expect(defaultParsers[arrayOid]).toBeTypeOf('function')
      expect(defaultSerializers[arrayOid]).toBeTypeOf('function')
    }
  })
})

describe('scalar parsers', () => {
  it('parses t as true and f as false', () => {
    expect(parse('t', OID.BOOL)).toBe(true)
    expect(parse('f', OID.BOOL)).toBe(false)
  })

  it('parses int2, int4, oid and floats as numbers', () => {
    expect(parse('-32768', OID.INT2)).toBe(-32768)
    expect(parse('2147483647', OID.INT4)).toBe(2147483647)
    expect(parse('4294967295', OID.OID)).toBe(4294967295)
    expect(parse('1.5', OID.FLOAT4)).toBe(1.5)
    expect(parse('-1.25e-10', OID.FLOAT8)).toBe(-1.25e-10)
  })

  it('parses NaN and infinities of float8', () => {
    expect(parse('NaN', OID.FLOAT8)).toBeNaN()
    expect(parse('Infinity', OID.FLOAT8)).toBe(Infinity)
    expect(parse('-Infinity', OID.FLOAT4)).toBe(-Infinity)
  })

  it('parses int8 within the safe range as a number', () => {
    expect(parse('42', OID.INT8)).toBe(42)
    expect(parse('9007199254740991', OID.INT8)).toBe(Number.MAX_SAFE_INTEGER)
    expect(parse('-9007199254740991', OID.INT8)).toBe(Number.MIN_SAFE_INTEGER)
  })

  it('parses int8 beyond the safe range as a bigint', () => {
    expect(parse('9007199254740992', OID.INT8)).toBe(9007199254740992n)
    expect(parse('9223372036854775807', OID.INT8)).toBe(9223372036854775807n)
    expect(parse('-9223372036854775808', OID.INT8)).toBe(-9223372036854775808n)
  })

  it('parses json and jsonb with JSON.parse', () => {
    expect(parse('{"a":[1,null,"x"]}', OID.JSON)).toEqual({ a: [1, null, 'x'] })
    expect(parse('"str"', OID.JSONB)).toBe('str')
    expect(parse('12', OID.JSONB)).toBe(12)
  })

  it('parses bytea hex output into a Uint8Array', () => {
    const bytes = parse('\\x0a0bFF00', OID.BYTEA)
    expect(bytes).toBeInstanceOf(Uint8Array)
    expect(Array.from(bytes as Uint8Array)).toEqual([10, 11, 255, 0])
  })

  it('parses empty bytea hex output into an empty Uint8Array', () => {
    expect(parse('\\x', OID.BYTEA)).toEqual(new Uint8Array(0))
  })

  it('parses bytea escape output into a Uint8Array', () => {
    expect(Array.from(parse('a\\\\\\000\\377', OID.BYTEA) as Uint8Array)).toEqual([97, 92, 0, 255])
  })

  it('rejects malformed bytea hex', () => {
    expect(() => parse('\\x0', OID.BYTEA)).toThrow(SyntaxError)
    expect(() => parse('\\xzz', OID.BYTEA)).toThrow(SyntaxError)
  })

  it('leaves text-like, numeric and temporal non-date types as strings', () => {
    for (const typeId of [OID.TEXT, OID.VARCHAR, OID.BPCHAR, OID.NAME, OID.CHAR, OID.NUMERIC, OID.UUID,
      OID.TIME, OID.TIMETZ, OID.INTERVAL]) {
      expect(parseValue('12345678901234567890.000001', typeId, defaultParsers)).toBe('12345678901234567890.000001')
    }
  })
})

describe('date and time parsers', () => {
  it('parses a timestamp without time zone as UTC', () => {
    const d = parse('2024-01-02 03:04:05', OID.TIMESTAMP) as Date
    expect(d.getTime()).toBe(Date.UTC(2024, 0, 2, 3, 4, 5))
  })

  it('truncates timestamp microseconds to milliseconds', () => {
    const d = parse('2024-01-02 03:04:05.123456', OID.TIMESTAMP) as Date
    expect(d.toISOString()).toBe('2024-01-02T03:04:05.123Z')
  })

  it('pads short fractional seconds', () => {
    const d = parse('2024-01-02 03:04:05.5', OID.TIMESTAMP) as Date
    expect(d.getUTCMilliseconds()).toBe(500)
  })

  it('parses a date as UTC midnight', () => {
    const d = parse('2024-01-02', OID.DATE) as Date
    expect(d.getTime()).toBe(Date.UTC(2024, 0, 2))
  })

  it('parses a timestamp with a +00 offset', () => {
    const d = parse('2024-01-02 03:04:05.123+00', OID.TIMESTAMPTZ) as Date
    expect(d.toISOString()).toBe('2024-01-02T03:04:05.123Z')
  })

  it('applies hour and minute offsets of timestamptz', () => {
    const d = parse('2024-01-02 03:04:05+05:30', OID.TIMESTAMPTZ) as Date
    expect(d.toISOString()).toBe('2024-01-01T21:34:05.000Z')
  })

  it('applies a negative offset with seconds', () => {
    const d = parse('1800-01-01 00:00:00-00:01:15', OID.TIMESTAMPTZ) as Date
    expect(d.getTime()).toBe(Date.UTC(1800, 0, 1, 0, 1, 15))
  })

  it('parses the same instant whatever the process time zone is', () => {
    const expected = Date.UTC(2024, 6, 1, 12, 0, 0)
    for (const tz of ['America/Los_Angeles', 'Asia/Kolkata', 'UTC']) {
      withTimeZone(tz, () => {
        expect((parse('2024-07-01 12:00:00', OID.TIMESTAMP) as Date).getTime()).toBe(expected)
        expect((parse('2024-07-01', OID.DATE) as Date).getTime()).toBe(Date.UTC(2024, 6, 1))
        expect((parse('2024-07-01 12:00:00+00', OID.TIMESTAMPTZ) as Date).getTime()).toBe(expected)
      })
    }
  })

  it('parses infinity and -infinity to numeric infinities', () => {
    expect(parse('infinity', OID.TIMESTAMP)).toBe(Infinity)
    expect(parse('-infinity', OID.TIMESTAMPTZ)).toBe(-Infinity)
    expect(parse('infinity', OID.DATE)).toBe(Infinity)
  })

  it('parses BC dates with astronomical year numbering', () => {
    const d = parse('0044-03-15 12:00:00+00 BC', OID.TIMESTAMPTZ) as Date
    expect(d.getUTCFullYear()).toBe(-43)
    expect(d.getUTCMonth()).toBe(2)
    expect(d.getUTCDate()).toBe(15)
    expect((parse('0001-01-01 BC', OID.DATE) as Date).getUTCFullYear()).toBe(0)
  })

  it('parses years before 100 without shifting them into the 1900s', () => {
    expect((parse('0099-12-31', OID.DATE) as Date).getUTCFullYear()).toBe(99)
  })

  it('parses five-digit years', () => {
    expect((parse('10000-01-01 00:00:00+00', OID.TIMESTAMPTZ) as Date).getUTCFullYear()).toBe(10000)
  })
})

describe('parseArray', () => {
  it('parses a flat int4 array with NULLs', () => {
    expect(parse('{1,2,NULL}', 1007)).toEqual([1, 2, null])
  })

  it('parses a nested int4 array with NULLs', () => {
    expect(parse('{{1,NULL},{3,4}}', 1007)).toEqual([[1, null], [3, 4]])
  })

  it('parses an empty array', () => {
    expect(parse('{}', 1009)).toEqual([])
  })

  it('distinguishes quoted "NULL" from unquoted NULL', () => {
    expect(parse('{"a b","c\\"d",NULL,"NULL"}', 1009)).toEqual(['a b', 'c"d', null, 'NULL'])
  })

  it('unescapes backslashes and keeps braces and empty strings inside quotes', () => {
    expect(parse('{"x\\\\y","{}","",","}', 1009)).toEqual(['x\\y', '{}', '', ','])
  })

  it('parses elements with the element type parser', () => {
    expect(parse('{t,f,NULL}', 1000)).toEqual([true, false, null])
    expect(parse('{1,9223372036854775807}', 1016)).toEqual([1, 9223372036854775807n])
    expect(parse('{"{\\"a\\":1}",null}', 199)).toEqual([{ a: 1 }, null])
  })

  it('parses bytea arrays into Uint8Arrays', () => {
    expect(parse('{"\\\\x01ff","\\\\x"}', 1001)).toEqual([new Uint8Array([1, 255]), new Uint8Array(0)])
  })

  it('parses timestamptz arrays into Dates', () => {
    const [d] = parse('{"2024-01-02 03:04:05+00",infinity}', 1185) as [Date, number]
    expect(d.toISOString()).toBe('2024-01-02T03:04:05.000Z')
    expect((parse('{"2024-01-02 03:04:05+00",infinity}', 1185) as unknown[])[1]).toBe(Infinity)
  })

  it('keeps numeric array elements as strings', () => {
    expect(parse('{1.10,NaN}', 1231)).toEqual(['1.10', 'NaN'])
  })

  it('splits box arrays on semicolons', () => {
    expect(parse('{(1,1),(0,0);(2,2),(1,1)}', 1020)).toEqual(['(1,1),(0,0)', '(2,2),(1,1)'])
  })

  it('accepts a custom delimiter argument', () => {
    expect(parseArray('{a;b,c}', undefined, 0, ';')).toEqual(['a', 'b,c'])
  })

  it('drops the lower-bound decoration of non-1-based arrays', () => {
    expect(parse('[0:1]={1,2}', 1007)).toEqual([1, 2])
  })

  it('ignores whitespace around unquoted elements', () => {
    expect(parseArray('{ a , b }', undefined, OID.TEXT)).toEqual(['a', 'b'])
  })

  it('treats unquoted NULL case-insensitively', () => {
    expect(parseArray('{null,NuLl}', undefined, OID.TEXT)).toEqual([null, null])
  })

  it('rejects malformed array text', () => {
    expect(() => parseArray('{1,2', undefined, OID.TEXT)).toThrow(SyntaxError)
    expect(() => parseArray('{"a}', undefined, OID.TEXT)).toThrow(SyntaxError)
    expect(() => parseArray('{1,,2}', undefined, OID.TEXT)).toThrow(SyntaxError)
    expect(() => parseArray('{1}x', undefined, OID.TEXT)).toThrow(SyntaxError)
  })

  it('builds array parsers for runtime types with string elements', () => {
    const moodArray = makeArrayParser(undefined, 16384)
    expect(moodArray('{happy,"very sad",NULL}', 16385)).toEqual(['happy', 'very sad', null])
  })

  it('passes the element type id to the element parser', () => {
    const seen: number[] = []
    const p = makeArrayParser((v, typeId) => {
      seen.push(typeId)
      return v
    }, 16384)
    p('{a,b}', 16385)
    expect(seen).toEqual([16384, 16384])
  })
})

describe('parseValue', () => {
  it('returns null for SQL NULL', () => {
    expect(parseValue(null, OID.INT4, defaultParsers)).toBeNull()
  })

  it('returns the string for types without a parser', () => {
    expect(parseValue('(1,2)', 999999, defaultParsers)).toBe('(1,2)')
  })

  it('uses the registered parser', () => {
    expect(parseValue('7', OID.INT4, defaultParsers)).toBe(7)
  })
})

describe('scalar serializers', () => {
  it('serializes text from strings, numbers and Dates', () => {
    expect(serialize('héllo', OID.TEXT)).toBe('héllo')
    expect(serialize(12, OID.VARCHAR)).toBe('12')
    expect(serialize(new Date(Date.UTC(2024, 0, 2)), OID.TEXT)).toBe('2024-01-02T00:00:00.000Z')
  })

  it('serializes numbers with String', () => {
    expect(serialize(1.5, OID.FLOAT8)).toBe('1.5')
    expect(serialize(NaN, OID.FLOAT8)).toBe('NaN')
    expect(serialize(-3, OID.INT4)).toBe('-3')
  })

  it('serializes int8 from bigint, number and string', () => {
    expect(serialize(9223372036854775807n, OID.INT8)).toBe('9223372036854775807')
    expect(serialize(42, OID.INT8)).toBe('42')
    expect(serialize('-7', OID.INT8)).toBe('-7')
  })

  it('passes json strings through unchanged', () => {
    expect(serialize('{"a":1}', OID.JSON)).toBe('{"a":1}')
    expect(serialize('not json', OID.JSONB)).toBe('not json')
  })

  it('stringifies json values and turns bigints into strings', () => {
    expect(serialize({ a: 1n, b: [true, null] }, OID.JSONB)).toBe('{"a":"1","b":[true,null]}')
    expect(serialize([1, 2], OID.JSON)).toBe('[1,2]')
    expect(serialize(null, OID.JSON)).toBe('null')
  })

  it('rejects values JSON cannot represent', () => {
    expect(() => serialize(() => 1, OID.JSON)).toThrow(TypeError)
  })

  it('serializes booleans and 1/0 to t and f', () => {
    expect(serialize(true, OID.BOOL)).toBe('t')
    expect(serialize(false, OID.BOOL)).toBe('f')
    expect(serialize(1, OID.BOOL)).toBe('t')
    expect(serialize(0, OID.BOOL)).toBe('f')
  })

  it('accepts boolean words trimmed and case-insensitively', () => {
    for (const word of ['true', 'T', ' yes ', 'Y', 'on', '1']) expect(serialize(word, OID.BOOL)).toBe('t')
    for (const word of ['FALSE', 'f', 'No', 'n', ' off', '0']) expect(serialize(word, OID.BOOL)).toBe('f')
  })

  it('rejects other boolean input with a TypeError naming the value', () => {
    expect(() => serialize('maybe', OID.BOOL)).toThrow(/"maybe"/)
    expect(() => serialize('maybe', OID.BOOL)).toThrow(TypeError)
    expect(() => serialize(2, OID.BOOL)).toThrow(TypeError)
    expect(() => serialize({}, OID.BOOL)).toThrow(TypeError)
  })

  it('serializes Dates and epoch milliseconds as ISO strings', () => {
    expect(serialize(new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)), OID.TIMESTAMPTZ)).toBe('2024-01-02T03:04:05.006Z')
    expect(serialize(0, OID.TIMESTAMP)).toBe('1970-01-01T00:00:00.000Z')
  })

  it('passes date strings through unchanged', () => {
    expect(serialize('2024-01-02', OID.DATE)).toBe('2024-01-02')
  })

  it('serializes infinities as infinity and -infinity', () => {
    expect(serialize(Infinity, OID.TIMESTAMPTZ)).toBe('infinity')
    expect(serialize(-Infinity, OID.DATE)).toBe('-infinity')
  })

  it('serializes BC and five-digit years in a form PostgreSQL accepts', () => {
    const bc = new Date(0)
    bc.setUTCFullYear(-43, 2, 15)
    expect(serialize(bc, OID.TIMESTAMPTZ)).toBe('0044-03-15 00:00:00.000+00 BC')
    expect(serialize(new Date(Date.UTC(10000, 0, 1)), OID.TIMESTAMPTZ)).toBe('10000-01-01 00:00:00.000+00')
  })

  it('round-trips a BC timestamp through serializer and parser', () => {
    const bc = new Date(0)
    bc.setUTCFullYear(-500, 5, 1)
    const text = serialize(bc, OID.TIMESTAMPTZ)
    expect((parse(text, OID.TIMESTAMPTZ) as Date).getTime()).toBe(bc.getTime())
  })

  it('rejects an invalid Date with a TypeError', () => {
    expect(() => serialize(new Date(NaN), OID.TIMESTAMPTZ)).toThrow(TypeError)
    expect(() => serialize(NaN, OID.TIMESTAMP)).toThrow(TypeError)
    expect(() => serialize(new Date(NaN), OID.TEXT)).toThrow(TypeError)
  })

  it('rejects non-date objects for date types', () => {
    expect(() => serialize({}, OID.DATE)).toThrow(TypeError)
  })

  it('serializes bytea as lowercase hex', () => {
    expect(serialize(new Uint8Array([0, 1, 0xab, 0xff]), OID.BYTEA)).toBe('\\x0001abff')
  })

  it('serializes empty bytea as \\x', () => {
    expect(serialize(new Uint8Array(0), OID.BYTEA)).toBe('\\x')
  })

  it('round-trips large bytea values through hex', () => {
    const bytes = new Uint8Array(5000)
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31) & 255
    const hex = serialize(bytes, OID.BYTEA)
    expect(hex.length).toBe(2 + 10000)
    expect(hex).toBe('\\x' + Buffer.from(bytes).toString('hex'))
    expect(parse(hex, OID.BYTEA)).toEqual(bytes)
  })

  it('rejects non-Uint8Array bytea input with a TypeError', () => {
    expect(() => serialize('\\x01', OID.BYTEA)).toThrow(TypeError)
    expect(() => serialize([1, 2], OID.BYTEA)).toThrow(TypeError)
  })
})

describe('array serializers', () => {
  it('quotes every element and writes NULL for null and undefined', () => {
    expect(serialize([1, null, 3, undefined], 1007)).toBe('{"1",NULL,"3",NULL}')
  })

  it('serializes an empty array as {}', () => {
    expect(serialize([], 1009)).toBe('{}')
  })

  it('serializes nested arrays as nested braces', () => {
    expect(serialize([[1, 2], [3, null]], 1007)).toBe('{{"1","2"},{"3",NULL}}')
  })

  it('escapes backslashes and double quotes', () => {
    expect(serialize(['a"b', 'c\\d'], 1009)).toBe('{"a\\"b","c\\\\d"}')
  })

  it('serializes Date elements of timestamptz[] as ISO strings', () => {
    expect(serialize([new Date(0)], 1185)).toBe('{"1970-01-01T00:00:00.000Z"}')
  })

  it('serializes Uint8Array elements of bytea[] as escaped hex', () => {
    expect(serialize([new Uint8Array([1, 255]), null], 1001)).toBe('{"\\\\x01ff",NULL}')
  })

  it('serializes json[] elements with the json serializer', () => {
    expect(serialize([{ a: 1 }, 'raw'], 199)).toBe('{"{\\"a\\":1}","raw"}')
  })

  it('serializes bool[] elements with the bool serializer', () => {
    expect(serialize([true, 'no'], 1000)).toBe('{"t","f"}')
  })

  it('uses semicolons for box arrays', () => {
    expect(serialize(['(1,1),(0,0)', '(2,2),(1,1)'], 1020)).toBe('{"(1,1),(0,0)";"(2,2),(1,1)"}')
  })

  it('passes a string through as an existing array literal', () => {
    expect(serialize('{1,2}', 1007)).toBe('{1,2}')
  })

  it('rejects non-array input with a TypeError', () => {
    expect(() => serialize(5, 1007)).toThrow(TypeError)
  })

  it('round-trips awkward strings through serializeArray and parseArray', () => {
    const values = ['a"b', 'back\\slash', 'x,y', '{brace}', ' spaced ', 'NULL', 'null', '', 'ünïcødé 🐘', '\\"', 'tab\there']
    const text = serializeArray(values, undefined)
    expect(parseArray(text, undefined, OID.TEXT)).toEqual(values)
  })

  it('round-trips nested arrays with NULLs', () => {
    const values = [[['a', null]], [['NULL', '"']]]
    expect(parseArray(serializeArray(values, undefined), undefined, OID.TEXT)).toEqual(values)
  })

  it('round-trips bytea arrays', () => {
    const values = [new Uint8Array([0, 92, 34]), new Uint8Array(0), null]
    expect(parse(serialize(values, 1001), 1001)).toEqual(values)
  })

  it('uses the delimiter argument of serializeArray', () => {
    expect(serializeArray(['a', 'b'], undefined, ';')).toBe('{"a";"b"}')
  })
})

describe('serializeByValue', () => {
  it('returns null for null and undefined', () => {
    expect(serializeByValue(null)).toBeNull()
    expect(serializeByValue(undefined)).toBeNull()
  })

  it('returns strings unchanged', () => {
    expect(serializeByValue('x')).toBe('x')
  })

  it('stringifies numbers and bigints', () => {
    expect(serializeByValue(1.5)).toBe('1.5')
    expect(serializeByValue(2n ** 64n)).toBe('18446744073709551616')
  })

  it('spells booleans as true and false', () => {
    expect(serializeByValue(true)).toBe('true')
    expect(serializeByValue(false)).toBe('false')
  })

  it('serializes Dates as ISO strings', () => {
    expect(serializeByValue(new Date(0))).toBe('1970-01-01T00:00:00.000Z')
  })

  it('rejects an invalid Date with a TypeError', () => {
    expect(() => serializeByValue(new Date('nope'))).toThrow(TypeError)
  })

  it('returns a Uint8Array as is', () => {
    const bytes = new Uint8Array([1, 2])
    expect(serializeByValue(bytes)).toBe(bytes)
  })

  it('wraps an ArrayBuffer in a Uint8Array', () => {
    const out = serializeByValue(new Uint8Array([7, 8]).buffer)
    expect(out).toBeInstanceOf(Uint8Array)
    expect(Array.from(out as Uint8Array)).toEqual([7, 8])
  })

  it('serializes arrays as PostgreSQL array literals', () => {
    expect(serializeByValue([1, 'a"b', null, [true]])).toBe('{"1","a\\"b",NULL,{"true"}}')
  })

  it('serializes Uint8Array array elements as hex text', () => {
    expect(serializeByValue([new Uint8Array([0xde, 0xad])])).toBe('{"\\\\xdead"}')
  })

  it('serializes Date array elements as ISO strings', () => {
    expect(serializeByValue([new Date(0)])).toBe('{"1970-01-01T00:00:00.000Z"}')
  })

  it('serializes other objects as JSON with bigints as strings', () => {
    expect(serializeByValue({ a: 1n, b: 'x' })).toBe('{"a":"1","b":"x"}')
  })

  it('rejects symbols and functions with a TypeError', () => {
    expect(() => serializeByValue(Symbol('s'))).toThrow(TypeError)
    expect(() => serializeByValue(() => 1)).toThrow(TypeError)
  })
})

describe('needsParamTypes', () => {
  it('is true when a value is a JS array', () => {
    expect(needsParamTypes([1, [1, 2]])).toBe(true)
  })

  it('is true when a value is a plain object', () => {
    expect(needsParamTypes([{ a: 1 }])).toBe(true)
    expect(needsParamTypes([Object.create(null)])).toBe(true)
  })

  it('is false for scalars, Dates and typed arrays', () => {
    expect(needsParamTypes([1, 'a', null, undefined, true, 1n, new Date(), new Uint8Array(1)])).toBe(false)
  })

  it('is false for no values', () => {
    expect(needsParamTypes([])).toBe(false)
  })
})
