import { describe, expect, it } from 'vitest'
import { Prisma } from './generated/client.js'
import { prismaForThisFile } from './helpers.js'

const { prisma } = await prismaForThisFile()

async function seedUsers(count: number): Promise<void> {
  await prisma.user.createMany({ data: Array.from({ length: count }, (_, i) => ({ email: `u${i}@x.io`, name: `User ${i}`, score: i })) })
}

describe('Prisma Client on a pgwasm database', () => {
  it('creates, reads, updates and deletes a row', async () => {
    const created = await prisma.user.create({ data: { email: 'ada@x.io', name: 'Ada' } })
    expect(created).toMatchObject({ email: 'ada@x.io', name: 'Ada', role: 'USER', active: true })
    expect(await prisma.user.findUnique({ where: { id: created.id } })).toMatchObject({ name: 'Ada' })
    await prisma.user.update({ where: { id: created.id }, data: { name: 'Ada L.' } })
    expect((await prisma.user.findUniqueOrThrow({ where: { email: 'ada@x.io' } })).name).toBe('Ada L.')
    await prisma.user.delete({ where: { id: created.id } })
    expect(await prisma.user.count()).toBe(0)
  })

  it('round-trips every column type of the schema', async () => {
    const avatar = new Uint8Array([0, 1, 2, 253, 254, 255])
    const createdAt = new Date('2024-05-06T07:08:09.123Z')
    const created = await prisma.user.create({
      data: {
        email: 'types@x.io',
        role: 'ADMIN',
        roles: ['ADMIN', 'USER'],
        profile: { nested: { list: [1, 'two', null, true] }, quote: 'a "b" \\ c' },
        balance: new Prisma.Decimal('1234567890.12'),
        visits: 9007199254740993n,
        score: 0.1 + 0.2,
        active: false,
        avatar,
        tags: ['plain', 'with,comma', 'with "quotes"', 'back\\slash', '{braces}', 'NULL', ''],
        createdAt,
        birthday: new Date('1999-12-31T00:00:00.000Z'),
      },
    })
    const read = await prisma.user.findUniqueOrThrow({ where: { id: created.id } })
    expect(read.role).toBe('ADMIN')
    expect(read.roles).toEqual(['ADMIN', 'USER'])
    expect(read.profile).toEqual({ nested: { list: [1, 'two', null, true] }, quote: 'a "b" \\ c' })
    expect(read.balance).toBeInstanceOf(Prisma.Decimal)
    expect(read.balance.toString()).toBe('1234567890.12')
    expect(read.visits).toBe(9007199254740993n)
    expect(read.score).toBe(0.1 + 0.2)
    expect(read.active).toBe(false)
    expect(Array.from(read.avatar!)).toEqual(Array.from(avatar))
    expect(read.tags).toEqual(['plain', 'with,comma', 'with "quotes"', 'back\\slash', '{braces}', 'NULL', ''])
    expect(read.createdAt.toISOString()).toBe(createdAt.toISOString())
    expect(read.birthday!.toISOString()).toBe('1999-12-31T00:00:00.000Z')
  })

  it('stores a uuid id and a timestamptz and reads them back', async () => {
    const user = await prisma.user.create({ data: { email: 'p@x.io' } })
    const at = new Date('2020-02-29T23:59:59.999Z')
    const post = await prisma.post.create({ data: { title: 'T', authorId: user.id, createdAt: at } })
    expect(post.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    const read = await prisma.post.findUniqueOrThrow({ where: { id: post.id } })
    expect(read.createdAt.toISOString()).toBe(at.toISOString())
  })

  it('filters on a list, an enum, a date range and a Json path', async () => {
    await prisma.user.createMany({
      data: [
        { email: 'a@x.io', tags: ['red'], role: 'ADMIN', profile: { tier: 'gold' }, createdAt: new Date('2024-01-01') },
        { email: 'b@x.io', tags: ['blue'], profile: { tier: 'silver' }, createdAt: new Date('2024-06-01') },
      ],
    })
    expect((await prisma.user.findMany({ where: { tags: { has: 'red' } } })).map((u) => u.email)).toEqual(['a@x.io'])
    expect((await prisma.user.findMany({ where: { role: { in: ['ADMIN'] } } })).map((u) => u.email)).toEqual(['a@x.io'])
    expect(await prisma.user.count({ where: { createdAt: { gte: new Date('2024-03-01') } } })).toBe(1)
    expect((await prisma.user.findMany({ where: { profile: { path: ['tier'], equals: 'silver' } } })).map((u) => u.email)).toEqual(['b@x.io'])
    expect((await prisma.user.findMany({ where: { email: { in: ['a@x.io', 'b@x.io', 'c@x.io'] } }, orderBy: { email: 'desc' } })).map((u) => u.email)).toEqual([
      'b@x.io',
      'a@x.io',
    ])
  })

  it('writes nested relations and reads them with include and select', async () => {
    const user = await prisma.user.create({
      data: { email: 'author@x.io', posts: { create: [{ title: 'First', published: true }, { title: 'Second' }] } },
      include: { posts: { orderBy: { title: 'asc' } } },
    })
    expect(user.posts.map((p) => p.title)).toEqual(['First', 'Second'])
    const selected = await prisma.user.findUniqueOrThrow({
      where: { email: 'author@x.io' },
      select: { email: true, posts: { where: { published: true }, select: { title: true } }, _count: { select: { posts: true } } },
    })
    expect(selected).toEqual({ email: 'author@x.io', posts: [{ title: 'First' }], _count: { posts: 2 } })
    const post = await prisma.post.findFirstOrThrow({ where: { title: 'Second' }, include: { author: { select: { email: true } } } })
    expect(post.author.email).toBe('author@x.io')
    await prisma.user.update({ where: { id: user.id }, data: { posts: { updateMany: { where: {}, data: { views: { increment: 5 } } } } } })
    expect((await prisma.post.aggregate({ _sum: { views: true } }))._sum.views).toBe(10)
  })

  it('paginates with skip, take and a cursor', async () => {
    await seedUsers(25)
    const page = await prisma.user.findMany({ orderBy: { id: 'asc' }, skip: 10, take: 5, select: { name: true } })
    expect(page.map((u) => u.name)).toEqual(['User 10', 'User 11', 'User 12', 'User 13', 'User 14'])
    const first = await prisma.user.findMany({ orderBy: { id: 'asc' }, take: 3 })
    const next = await prisma.user.findMany({ orderBy: { id: 'asc' }, cursor: { id: first[2]!.id }, skip: 1, take: 3 })
    expect(next.map((u) => u.name)).toEqual(['User 3', 'User 4', 'User 5'])
  })

  it('aggregates and groups', async () => {
    await seedUsers(10)
    await prisma.user.updateMany({ where: { score: { gte: 5 } }, data: { role: 'ADMIN', balance: 2.5 } })
    const agg = await prisma.user.aggregate({ _count: true, _avg: { score: true }, _sum: { balance: true }, _max: { score: true } })
    expect(agg._count).toBe(10)
    expect(agg._avg.score).toBe(4.5)
    expect(agg._sum.balance?.toString()).toBe('12.5')
    expect(agg._max.score).toBe(9)
    const groups = await prisma.user.groupBy({ by: ['role'], _count: { _all: true }, _min: { score: true }, orderBy: { role: 'asc' } })
    expect(groups).toEqual([
      { role: 'USER', _count: { _all: 5 }, _min: { score: 0 } },
      { role: 'ADMIN', _count: { _all: 5 }, _min: { score: 5 } },
    ])
  })

  it('upserts, and deletes many', async () => {
    await prisma.user.upsert({ where: { email: 'u@x.io' }, create: { email: 'u@x.io', name: 'new' }, update: { name: 'updated' } })
    await prisma.user.upsert({ where: { email: 'u@x.io' }, create: { email: 'u@x.io', name: 'new' }, update: { name: 'updated' } })
    expect((await prisma.user.findUniqueOrThrow({ where: { email: 'u@x.io' } })).name).toBe('updated')
    await seedUsers(3)
    expect((await prisma.user.deleteMany({ where: { email: { startsWith: 'u' } } })).count).toBe(4)
  })

  it('runs $queryRaw with typed results and $executeRaw with a row count', async () => {
    await seedUsers(3)
    const changed = await prisma.$executeRaw`UPDATE "User" SET visits = visits + ${10n} WHERE score >= ${1}`
    expect(changed).toBe(2)
    const rows = await prisma.$queryRaw<{ email: string; visits: bigint; balance: Prisma.Decimal; at: Date; doc: unknown; bytes: Uint8Array; ok: boolean }[]>`
      SELECT email, visits, balance, now() AS at, '{"a":[1,2]}'::jsonb AS doc, '\\x0102'::bytea AS bytes, true AS ok
      FROM "User" WHERE email = ${'u1@x.io'}`
    expect(rows).toHaveLength(1)
    const row = rows[0]!
    expect(row.visits).toBe(10n)
    expect(row.balance.toString()).toBe('0')
    expect(row.at).toBeInstanceOf(Date)
    expect(row.doc).toEqual({ a: [1, 2] })
    expect(Array.from(row.bytes)).toEqual([1, 2])
    expect(row.ok).toBe(true)
    const unsafe = await prisma.$queryRawUnsafe<{ n: number }[]>('SELECT count(*)::int AS n FROM "User" WHERE name = ANY($1)', ['User 0', 'User 2'])
    expect(unsafe).toEqual([{ n: 2 }])
  })
})
