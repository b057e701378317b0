/**
 * Column values through the adapter on both kinds of instance: one with
 * pgwasm's default parsers (values converted after the query) and one made
 * with `prismaParsers` (values right from the text).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { ColumnTypeEnum } from '@prisma/driver-adapter-utils'
import { PrismaPGlite, diffSchema, prismaParsers } from '../src/index.js'
import { Prisma, PrismaClient } from './generated/client.js'
import { SCHEMA } from './helpers.js'

let sql = ''
beforeAll(async () => {
  sql = await diffSchema({ to: { schema: SCHEMA } })
})

const kinds = [
  ['default parsers', {}],
  ['prismaParsers', { parsers: prismaParsers }],
] as const

describe.each(kinds)('an instance with %s', (_name, options) => {
  let db: PGlite
  let prisma: PrismaClient

  beforeAll(async () => {
    db = await PGlite.create(options)
    await db.exec(sql)
    await db.refreshArrayTypes()
    prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })
  })

  afterAll(async () => {
    await prisma.$disconnect()
    await db.close()
  })

  it('round-trips BigInt beyond 2^53, Json with big numbers, dates and bytes', async () => {
    const user = await prisma.user.create({
      data: {
        email: `${_name}@x.io`,
        visits: -9223372036854775808n,
        profile: { list: [1.5, 'x', { deep: null }], n: 12345678901234567890 },
        birthday: new Date('0099-01-02T00:00:00.000Z'),
        createdAt: new Date('2038-01-19T03:14:07.999Z'),
        avatar: new Uint8Array(300).map((_, i) => i % 256),
      },
    })
    const read = await prisma.user.findUniqueOrThrow({ where: { id: user.id } })
    expect(read.visits).toBe(-9223372036854775808n)
    expect(read.profile).toEqual({ list: [1.5, 'x', { deep: null }], n: 12345678901234567890 })
    expect(read.birthday!.toISOString()).toBe('0099-01-02T00:00:00.000Z')
    expect(read.createdAt.toISOString()).toBe('2038-01-19T03:14:07.999Z')
    expect(Array.from(read.avatar!)).toEqual(Array.from({ length: 300 }, (_, i) => i % 256))
  })

  it('reads a timestamptz right when the session time zone is not UTC', async () => {
    const user = await prisma.user.create({ data: { email: `tz-${_name}@x.io` } })
    const at = new Date('2024-07-01T12:30:45.678Z')
    await prisma.post.create({ data: { title: 'tz', authorId: user.id, createdAt: at } })
    await db.exec(`SET TimeZone = 'America/New_York'`)
    try {
      const post = await prisma.post.findFirstOrThrow({ where: { title: 'tz' } })
      expect(post.createdAt.toISOString()).toBe(at.toISOString())
      const [raw] = await prisma.$queryRaw<{ at: Date }[]>`SELECT "createdAt" AS at FROM "Post" WHERE title = 'tz'`
      expect(raw!.at.toISOString()).toBe(at.toISOString())
    } finally {
      await db.exec(`SET TimeZone = 'UTC'`)
    }
  })

  it('reads arrays of every mapped element type through $queryRaw', async () => {
    const [row] = await prisma.$queryRaw<Record<string, unknown>[]>`
      SELECT ARRAY[1, 2]::int4[] AS ints, ARRAY[9007199254740993]::int8[] AS bigs, ARRAY[1.5]::float8[] AS floats,
             ARRAY['1.10']::numeric[] AS decimals, ARRAY[true, false] AS bools, ARRAY['a', NULL, 'c,d'] AS texts,
             ARRAY['2024-01-02']::date[] AS dates, ARRAY['2024-01-02 03:04:05.5']::timestamp[] AS stamps,
             ARRAY['{"a":1}']::jsonb[] AS docs, ARRAY['\\x0a0b']::bytea[] AS blobs,
             ARRAY['00000000-0000-0000-0000-000000000001']::uuid[] AS uuids, '12:34:56+02'::timetz AS tz`
    expect(row!.ints).toEqual([1, 2])
    expect(row!.bigs).toEqual([9007199254740993n])
    expect(row!.floats).toEqual([1.5])
    expect(String((row!.decimals as Prisma.Decimal[])[0])).toBe('1.1')
    expect(row!.bools).toEqual([true, false])
    expect(row!.texts).toEqual(['a', null, 'c,d'])
    expect((row!.dates as Date[]).map((d) => d.toISOString())).toEqual(['2024-01-02T00:00:00.000Z'])
    expect((row!.stamps as Date[]).map((d) => d.toISOString())).toEqual(['2024-01-02T03:04:05.500Z'])
    expect(row!.docs).toEqual([{ a: 1 }])
    expect((row!.blobs as Uint8Array[]).map((b) => Array.from(b))).toEqual([[10, 11]])
    expect(row!.uuids).toEqual(['00000000-0000-0000-0000-000000000001'])
    expect((row!.tz as Date).toISOString()).toBe('1970-01-01T12:34:56.000Z')
  })

  it('reports a column type Prisma cannot read as UnsupportedNativeDataType', async () => {
    const adapter = await new PrismaPGlite(db).connect()
    await expect(adapter.queryRaw({ sql: `SELECT '1 day'::interval AS i`, args: [], argTypes: [] })).rejects.toMatchObject({
      cause: { kind: 'UnsupportedNativeDataType', type: 'interval' },
    })
    const ok = await adapter.queryRaw({ sql: 'SELECT 1::int2 AS a, 2::int8 AS b', args: [], argTypes: [] })
    expect(ok.columnTypes).toEqual([ColumnTypeEnum.Int32, ColumnTypeEnum.Int64])
    expect(ok.rows).toEqual([[1, '2']])
  })
})
