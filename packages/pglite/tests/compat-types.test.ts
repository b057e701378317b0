// The `types` namespace (as `@electric-sql/pglite` exports it, and as
// drizzle-orm's pglite driver imports it) agrees with the engine: what
// `parseType` makes of a value's text is what `query()` returns for it, and
// what a serializer writes is input the server reads back as the same value.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite, types } from '@pgwasm/pglite'

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
})

afterAll(async () => {
  await db.close()
})

// One expression per built-in type that has a parser, arrays included.
const EXPRESSIONS = [
  'true',
  "'\\x0102ff'::bytea",
  '9007199254740993::int8',
  '42::int8',
  '7::int2',
  '-12::int4',
  '26::oid',
  '1.5::float4',
  '2.25::float8',
  `'{"a":[1,2]}'::json`,
  `'{"b": null}'::jsonb`,
  "'2024-02-29'::date",
  "'2024-02-29 12:34:56.789'::timestamp",
  "'2024-02-29 12:34:56.789+02'::timestamptz",
  "'12.50'::numeric",
  "'hello'::text",
  "ARRAY[1,NULL,3]::int4[]",
  `ARRAY['a b', 'c"d', NULL]::text[]`,
  "ARRAY[ARRAY[true,false],ARRAY[false,true]]",
  "'{(0,0),(1,1);(2,2),(3,3)}'::box[]",
]

describe('types from the root entry', () => {
  for (const expression of EXPRESSIONS) {
    it(`parses the text of ${expression} as query() returns it`, async () => {
      const sql = `SELECT ${expression} AS v`
      const { rows, fields } = await db.query<{ v: unknown }>(sql)
      const typeId = fields[0]!.dataTypeID
      // The same query with the type's parser swapped out: the wire text as is.
      const text = await db.query<{ v: string }>(sql, [], { parsers: { [typeId]: (wire) => wire } })
      expect(typeof text.rows[0]!.v).toBe('string')
      expect(types.parseType(text.rows[0]!.v, typeId)).toEqual(rows[0]!.v)
    })
  }

  it('parses SQL NULL as null and leaves a type without a parser as text', () => {
    expect(types.parseType(null, types.INT4)).toBeNull()
    expect(types.parseType('1 day', types.INTERVAL)).toBe('1 day')
  })

  it('uses the parsers passed to parseType over the built-in ones', () => {
    expect(types.parseType('5', types.INT4, { [types.INT4]: (text) => `int:${text}` })).toBe('int:5')
  })

  for (const [name, handler] of Object.entries(types.types)) {
    it(`serializes a ${name} value to text the server reads back to the same value`, async () => {
      const samples: Record<string, unknown> = {
        string: 'O\'Reilly "quoted"',
        number: 12.5,
        bigint: 9007199254740993n,
        json: { nested: [1, 'two', null] },
        boolean: false,
        date: new Date('2021-03-04T05:06:07.089Z'),
        bytea: Uint8Array.from([0, 1, 254, 255]),
      }
      const value = samples[name]
      const typeId = handler.to === 0 ? types.FLOAT8 : handler.to
      const { rows } = await db.query<{ v: unknown }>(`SELECT $1::text::${typeName(typeId)} AS v`, [handler.serialize(value)])
      expect(rows[0]!.v).toEqual(value)
    })
  }

  it('round-trips an int4 array through arraySerializer and arrayParser', async () => {
    const text = types.arraySerializer([[1, null], [3, 4]], types.serializers[types.INT4], 1007)
    const { rows } = await db.query<{ v: unknown }>('SELECT $1::text::int4[] AS v', [text])
    expect(rows[0]!.v).toEqual([[1, null], [3, 4]])
    expect(types.arrayParser(text, types.parsers[types.INT4]!, 1007)).toEqual([[1, null], [3, 4]])
  })

  it('refuses what the boolean serializer cannot send', () => {
    for (const bad of [2, 'maybe', '', {}]) expect(() => types.serializers[types.BOOL]!(bad)).toThrow(TypeError)
  })

  it('keys the parser and serializer tables by type name too', () => {
    expect(types.parsers.json).toBe(types.types.json.parse)
    expect(types.serializers.bytea).toBe(types.types.bytea.serialize)
  })
})

function typeName(typeId: number): string {
  const names: Record<number, string> = {
    [types.TEXT]: 'text',
    [types.FLOAT8]: 'float8',
    [types.INT8]: 'int8',
    [types.JSON]: 'json',
    [types.BOOL]: 'bool',
    [types.TIMESTAMPTZ]: 'timestamptz',
    [types.BYTEA]: 'bytea',
  }
  return names[typeId]!
}
