import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'

let db: PGlite
let tables = 0

beforeAll(async () => {
  db = await PGlite.create()
})

afterAll(async () => {
  await db?.close()
})

/** Stores `value` through a parameter in a fresh `type` column and reads it back. */
async function roundTrip(type: string, value: unknown): Promise<unknown> {
  const table = `rt_${++tables}`
  await db.exec(`create table ${table} (v ${type})`)
  await db.query(`insert into ${table} (v) values ($1)`, [value])
  const { rows } = await db.query<{ v: unknown }>(`select v from ${table}`)
  expect(rows).toHaveLength(1)
  return rows[0]!.v
}

/** The value PostgreSQL stored, as text (to check what the engine really holds). */
async function storedText(type: string, value: unknown): Promise<string> {
  const table = `rt_${++tables}`
  await db.exec(`create table ${table} (v ${type})`)
  await db.query(`insert into ${table} (v) values ($1)`, [value])
  const [result] = await db.exec(`select v::text as t from ${table}`)
  return result!.rows[0]!.t as string
}

function bytes(length: number, seed = 7): Uint8Array {
  const out = new Uint8Array(length)
  let x = seed
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}

describe('booleans and integers', () => {
  it('round-trips true and false through bool', async () => {
    expect(await roundTrip('bool', true)).toBe(true)
    expect(await roundTrip('bool', false)).toBe(false)
  })

  it('round-trips the int2 extremes as numbers', async () => {
    expect(await roundTrip('int2', -32768)).toBe(-32768)
    expect(await roundTrip('int2', 32767)).toBe(32767)
  })

  it('round-trips the int4 extremes as numbers', async () => {
    expect(await roundTrip('int4', -2147483648)).toBe(-2147483648)
    expect(await roundTrip('int4', 2147483647)).toBe(2147483647)
  })

  it('returns a number for an int8 within the safe integer range', async () => {
    expect(await roundTrip('int8', Number.MAX_SAFE_INTEGER)).toBe(Number.MAX_SAFE_INTEGER)
    expect(await roundTrip('int8', -Number.MAX_SAFE_INTEGER)).toBe(-Number.MAX_SAFE_INTEGER)
  })

  it('returns a bigint for an int8 beyond 2^53', async () => {
    const { rows } = await db.query('select 9007199254740993::int8 as v')
    expect(rows[0]!.v).toBe(9007199254740993n)
  })

  it('accepts bigint parameters for int8 and returns them exactly', async () => {
    expect(await roundTrip('int8', 9223372036854775807n)).toBe(9223372036854775807n)
    expect(await roundTrip('int8', -9223372036854775808n)).toBe(-9223372036854775808n)
  })

  it('round-trips an oid as a number', async () => {
    expect(await roundTrip('oid', 4294967295)).toBe(4294967295)
  })
})

describe('floating point and numeric', () => {
  it('round-trips float4 values', async () => {
    expect(await roundTrip('float4', 1.5)).toBe(1.5)
    expect(await roundTrip('float4', -0.25)).toBe(-0.25)
  })

  it('round-trips float8 values exactly', async () => {
    expect(await roundTrip('float8', 0.1 + 0.2)).toBe(0.1 + 0.2)
    expect(await roundTrip('float8', 1e-300)).toBe(1e-300)
  })

  it('round-trips NaN and the infinities through float4', async () => {
    expect(await roundTrip('float4', NaN)).toBeNaN()
    expect(await roundTrip('float4', Infinity)).toBe(Infinity)
    expect(await roundTrip('float4', -Infinity)).toBe(-Infinity)
  })

  it('round-trips NaN and the infinities through float8', async () => {
    expect(await roundTrip('float8', NaN)).toBeNaN()
    expect(await roundTrip('float8', Infinity)).toBe(Infinity)
    expect(await roundTrip('float8', -Infinity)).toBe(-Infinity)
  })

  it('returns numeric as an exact string', async () => {
    expect(await roundTrip('numeric', '12345678901234567890.123456789012')).toBe('12345678901234567890.123456789012')
  })

  it('accepts a number for numeric', async () => {
    expect(await roundTrip('numeric(10,3)', 2.5)).toBe('2.500')
  })
})

describe('character types', () => {
  it('round-trips text with unicode, quotes, backslashes and control characters', async () => {
    const value = `héllo 🌍 'single' "double" back\\slash\ttab\nnewline`
    expect(await roundTrip('text', value)).toBe(value)
  })

  it('round-trips an empty string as an empty string, not NULL', async () => {
    expect(await roundTrip('text', '')).toBe('')
  })

  it('round-trips varchar', async () => {
    expect(await roundTrip('varchar(10)', 'abc')).toBe('abc')
  })

  it('pads char(n) with spaces', async () => {
    expect(await roundTrip('char(5)', 'ab')).toBe('ab   ')
  })

  it('round-trips name', async () => {
    expect(await roundTrip('name', 'some_identifier')).toBe('some_identifier')
  })
})

describe('json and jsonb', () => {
  const object = { a: 1, b: [1, 'two', null], c: { d: true }, e: 'é"\\' }

  it('round-trips an object through json', async () => {
    expect(await roundTrip('json', object)).toEqual(object)
  })

  it('round-trips an object through jsonb', async () => {
    expect(await roundTrip('jsonb', object)).toEqual(object)
  })

  it('stores a JS array parameter for a jsonb column as a JSON array', async () => {
    const value = [1, 'a', { b: 2 }, [3]]
    expect(await storedText('jsonb', value)).toBe('[1, "a", {"b": 2}, [3]]')
    expect(await roundTrip('jsonb', value)).toEqual(value)
  })

  it('stores a JS array parameter for a json column as a JSON array', async () => {
    expect(await roundTrip('json', [1, 2, 3])).toEqual([1, 2, 3])
  })

  it('stores an empty JS array for jsonb as an empty JSON array', async () => {
    expect(await storedText('jsonb', [])).toBe('[]')
  })

  it('round-trips JSON scalars through jsonb', async () => {
    expect(await roundTrip('jsonb', 42)).toBe(42)
    expect(await roundTrip('jsonb', true)).toBe(true)
  })

  it('takes a string parameter for jsonb as JSON text', async () => {
    expect(await roundTrip('jsonb', '{"x": [1]}')).toEqual({ x: [1] })
  })

  it('serializes bigint values inside JSON as strings', async () => {
    expect(await roundTrip('jsonb', { big: 12345678901234567890n })).toEqual({ big: '12345678901234567890' })
  })
})

describe('bytea', () => {
  it('round-trips a Uint8Array', async () => {
    const value = new Uint8Array([0, 1, 2, 127, 128, 254, 255])
    const back = await roundTrip('bytea', value)
    expect(back).toBeInstanceOf(Uint8Array)
    expect(back).toEqual(value)
  })

  it('round-trips an empty Uint8Array', async () => {
    const back = await roundTrip('bytea', new Uint8Array(0))
    expect(back).toBeInstanceOf(Uint8Array)
    expect((back as Uint8Array).length).toBe(0)
  })

  it('round-trips 100 KB of bytes', async () => {
    const value = bytes(100 * 1024)
    const back = (await roundTrip('bytea', value)) as Uint8Array
    expect(back.length).toBe(value.length)
    expect(Buffer.from(back).equals(Buffer.from(value))).toBe(true)
  })

  it('returns bytea produced by the server as a Uint8Array', async () => {
    const { rows } = await db.query(`select '\\xdeadbeef'::bytea as v`)
    expect(rows[0]!.v).toEqual(new Uint8Array([0xde, 0xad, 0xbe, 0xef]))
  })
})

describe('dates and times', () => {
  it('round-trips a Date through date', async () => {
    const value = new Date('2024-02-29T00:00:00.000Z')
    expect(await roundTrip('date', value)).toEqual(value)
  })

  it('round-trips a Date with milliseconds through timestamp', async () => {
    const value = new Date('2024-01-02T03:04:05.678Z')
    expect(await roundTrip('timestamp', value)).toEqual(value)
  })

  it('round-trips a Date with milliseconds through timestamptz', async () => {
    const value = new Date('1999-12-31T23:59:59.999Z')
    expect(await roundTrip('timestamptz', value)).toEqual(value)
  })

  it('stores a timestamptz Date parameter as the same instant', async () => {
    const value = new Date('2024-06-01T12:00:00.000Z')
    const table = `rt_${++tables}`
    await db.exec(`create table ${table} (v timestamptz)`)
    await db.query(`insert into ${table} values ($1)`, [value])
    const { rows } = await db.query(`select extract(epoch from v)::float8 as e from ${table}`)
    expect(rows[0]!.e).toBe(value.getTime() / 1000)
  })

  it('parses timestamps and dates to the instant the engine computes, in any session time zone', async () => {
    // Years from 1 to 9999 (two-digit years and BC go another way than the
    // common four-digit form), microseconds, and zones with odd offsets.
    const sql = `select v, v::text as t, floor(extract(epoch from v) * 1000)::float8 as ms, v::date as d,
        floor(extract(epoch from v::date) * 1000)::float8 as dms
      from (select timestamptz '0001-01-01 00:00:00+00' + (g * 7919.123457) * interval '1 hour' * 11 as v
            from generate_series(0, 9999) g
            union all select timestamptz '1970-01-01 00:00:00.000001+00'
            union all select timestamptz '0044-03-15 12:00:00+00' - interval '2000 years') s`
    for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Europe/Amsterdam', 'Pacific/Chatham']) {
      await db.exec(`set timezone = '${zone}'`)
      const { rows } = await db.query<{ v: Date; t: string; ms: number; d: Date; dms: number }>(sql)
      expect(rows.length).toBe(10002)
      for (const row of rows) {
        if (row.v.getTime() !== row.ms) expect({ zone, text: row.t, ms: row.v.getTime() }).toEqual({ zone, text: row.t, ms: row.ms })
        if (row.d.getTime() !== row.dms) expect({ zone, text: row.t, date: row.d.getTime() }).toEqual({ zone, text: row.t, date: row.dms })
      }
    }
    await db.exec(`reset timezone`)
  })

  it('returns Infinity and -Infinity for infinite timestamps', async () => {
    expect(await roundTrip('timestamp', Infinity)).toBe(Infinity)
    expect(await roundTrip('timestamptz', -Infinity)).toBe(-Infinity)
  })

  it('returns Infinity and -Infinity for infinite dates', async () => {
    expect(await roundTrip('date', 'infinity')).toBe(Infinity)
    expect(await roundTrip('date', '-infinity')).toBe(-Infinity)
  })

  it('returns time as a string', async () => {
    expect(await roundTrip('time', '13:45:30.5')).toBe('13:45:30.5')
  })

  it('returns interval as a string', async () => {
    expect(await roundTrip('interval', '1 year 2 months 3 days 4 hours 5 minutes 6 seconds')).toBe(
      '1 year 2 mons 3 days 04:05:06',
    )
  })
})

describe('uuid', () => {
  it('round-trips a uuid string', async () => {
    expect(await roundTrip('uuid', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')).toBe('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')
  })

  it('returns an upper-case uuid in lower case', async () => {
    expect(await roundTrip('uuid', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11')).toBe('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')
  })
})

describe('arrays', () => {
  it('round-trips int4[] with NULL elements', async () => {
    expect(await roundTrip('int4[]', [1, -2, null, 2147483647])).toEqual([1, -2, null, 2147483647])
  })

  it('round-trips an empty int4[]', async () => {
    expect(await roundTrip('int4[]', [])).toEqual([])
  })

  it('round-trips text[] with quotes, commas, backslashes, braces, blanks, NULL and the string NULL', async () => {
    const value = ['a"b', 'c,d', 'e\\f', null, 'NULL', 'null', '', '  padded  ', '{x}', 'new\nline']
    expect(await roundTrip('text[]', value)).toEqual(value)
  })

  it('stores the string NULL in text[] as text, not as SQL NULL', async () => {
    const table = `rt_${++tables}`
    await db.exec(`create table ${table} (v text[])`)
    await db.query(`insert into ${table} values ($1)`, [['NULL', null]])
    const { rows } = await db.query(`select v[1] is null as first_null, v[2] is null as second_null from ${table}`)
    expect(rows).toEqual([{ first_null: false, second_null: true }])
  })

  it('round-trips a nested int[][]', async () => {
    expect(await roundTrip('int[][]', [[1, 2], [3, 4], [5, null]])).toEqual([[1, 2], [3, 4], [5, null]])
  })

  it('round-trips bool[]', async () => {
    expect(await roundTrip('bool[]', [true, false, null])).toEqual([true, false, null])
  })

  it('round-trips int8[] with values beyond 2^53 as bigints', async () => {
    expect(await roundTrip('int8[]', [1, 9007199254740993n])).toEqual([1, 9007199254740993n])
  })

  it('round-trips float8[] with NaN and Infinity', async () => {
    expect(await roundTrip('float8[]', [1.5, NaN, -Infinity])).toEqual([1.5, NaN, -Infinity])
  })

  it('round-trips timestamptz[] of Dates', async () => {
    const value = [new Date('2020-01-01T00:00:00.000Z'), new Date('2024-07-08T09:10:11.123Z'), null]
    expect(await roundTrip('timestamptz[]', value)).toEqual(value)
  })

  it('round-trips bytea[]', async () => {
    const value = [new Uint8Array([1, 2, 255]), new Uint8Array(0), null]
    expect(await roundTrip('bytea[]', value)).toEqual(value)
  })

  // A JS array inside the array is a sub-dimension, as in PGlite, so elements
  // here are objects and scalars.
  it('round-trips jsonb[] of objects and scalars', async () => {
    const value = [{ a: 1, s: 'x"y', list: [1, 2] }, 5, true, null]
    expect(await roundTrip('jsonb[]', value)).toEqual(value)
  })

  it('round-trips uuid[] and numeric[] as strings', async () => {
    expect(await roundTrip('uuid[]', ['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'])).toEqual(['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'])
    expect(await roundTrip('numeric[]', ['1.10', '-2'])).toEqual(['1.10', '-2'])
  })

  it('returns the array type OID in fields', async () => {
    const { fields } = await db.query('select $1::int4[] as a, $2::text[] as b', [[1], ['x']])
    expect(fields).toEqual([
      { name: 'a', dataTypeID: 1007 },
      { name: 'b', dataTypeID: 1009 },
    ])
  })
})

describe('NULL', () => {
  const types = [
    'bool', 'int2', 'int4', 'int8', 'float4', 'float8', 'numeric', 'text', 'varchar', 'char(3)', 'name',
    'json', 'jsonb', 'bytea', 'date', 'timestamp', 'timestamptz', 'time', 'interval', 'uuid', 'oid',
    'int4[]', 'text[]', 'int[][]', 'bool[]', 'timestamptz[]', 'bytea[]', 'jsonb[]',
  ]

  it('round-trips NULL for every type', async () => {
    const columns = types.map((t, i) => `c${i} ${t}`).join(', ')
    await db.exec(`create table rt_nulls (${columns})`)
    const placeholders = types.map((_, i) => `$${i + 1}`).join(', ')
    await db.query(`insert into rt_nulls values (${placeholders})`, types.map(() => null))
    const { rows } = await db.query('select * from rt_nulls')
    expect(rows).toEqual([Object.fromEntries(types.map((_, i) => [`c${i}`, null]))])
  })

  it('sends undefined as NULL', async () => {
    expect(await roundTrip('int4', undefined)).toBeNull()
  })
})

describe('enums', () => {
  beforeAll(async () => {
    await db.exec("create type mood as enum ('sad', 'ok', 'happy')")
  })

  it('returns an enum value as its label', async () => {
    expect(await roundTrip('mood', 'happy')).toBe('happy')
  })

  it('returns an enum[] as a JS array after refreshArrayTypes()', async () => {
    await db.refreshArrayTypes()
    expect(await roundTrip('mood[]', ['sad', 'happy', null])).toEqual(['sad', 'happy', null])
  })

  it('describes an enum[] parameter with the array type OID from the catalog', async () => {
    const { rows } = await db.query<{ oid: number }>("select typarray::int as oid from pg_type where typname = 'mood'")
    const described = await db.describeQuery('select $1::mood[] as m')
    expect(described.queryParams.map((p) => p.dataTypeID)).toEqual([rows[0]!.oid])
    expect(described.resultFields.map((f) => f.dataTypeID)).toEqual([rows[0]!.oid])
  })
})
