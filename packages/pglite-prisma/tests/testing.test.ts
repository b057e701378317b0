import { afterAll, describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { PrismaPGlite, TestDatabase, snapshot } from '../src/index.js'
import { PrismaClient } from './generated/client.js'
import { SCHEMA } from './helpers.js'

const testDb = await TestDatabase.create({
  schema: SCHEMA,
  setup: async (db) => {
    await db.query(`INSERT INTO "User" (email, name) VALUES ('seed@x.io', 'Seed')`)
  },
})
const prisma = new PrismaClient({ adapter: testDb.adapter })

afterAll(async () => {
  await prisma.$disconnect()
  await testDb.close()
})

describe('TestDatabase', () => {
  it('starts with the schema and the setup data', async () => {
    expect(await prisma.user.findMany({ select: { email: true } })).toEqual([{ email: 'seed@x.io' }])
  })

  it('reset brings back the snapshot, and the Prisma client follows it', async () => {
    await prisma.user.create({ data: { email: 'temp@x.io' } })
    await prisma.user.deleteMany({ where: { email: 'seed@x.io' } })
    const before = testDb.db
    await testDb.reset()
    expect(testDb.db).not.toBe(before)
    expect(await prisma.user.findMany({ select: { email: true } })).toEqual([{ email: 'seed@x.io' }])
  })

  it('restarts sequences on reset, so ids repeat across tests', async () => {
    await testDb.reset()
    const first = await prisma.user.create({ data: { email: 'one@x.io' } })
    await testDb.reset()
    const again = await prisma.user.create({ data: { email: 'one@x.io' } })
    expect(again.id).toBe(first.id)
  })

  it('snapshot() makes the current contents what reset returns to', async () => {
    await testDb.reset()
    await prisma.user.create({ data: { email: 'baseline@x.io' } })
    await testDb.snapshot()
    await prisma.user.create({ data: { email: 'later@x.io' } })
    await testDb.reset()
    expect((await prisma.user.findMany({ orderBy: { id: 'asc' }, select: { email: true } })).map((u) => u.email)).toEqual(['seed@x.io', 'baseline@x.io'])
  })

  it('resets in milliseconds once the next copy is ready', async () => {
    await testDb.reset()
    // The copy for the next reset is made in the background; a test runs meanwhile.
    await prisma.user.count()
    await testDb.ready()
    const started = performance.now()
    await testDb.reset()
    expect(performance.now() - started).toBeLessThan(100)
  })
})

describe('snapshot()', () => {
  it('restores independent copies of a database as it was', async () => {
    const db = await PGlite.create()
    try {
      await db.exec('CREATE TABLE t (n int); INSERT INTO t VALUES (1)')
      const snap = await snapshot(db)
      await db.exec('INSERT INTO t VALUES (2)')
      const a = await snap.restore()
      const b = await snap.restore()
      await a.exec('INSERT INTO t VALUES (3)')
      expect((await a.query('SELECT n FROM t ORDER BY n')).rows).toEqual([{ n: 1 }, { n: 3 }])
      expect((await b.query('SELECT n FROM t ORDER BY n')).rows).toEqual([{ n: 1 }])
      await Promise.all([a.close(), b.close(), snap.close()])
    } finally {
      await db.close()
    }
  })

  it('gives each restored copy its own Prisma client', async () => {
    const snap = await snapshot(testDb.db)
    const copy = await snap.restore()
    const other = new PrismaClient({ adapter: new PrismaPGlite(copy) })
    await other.user.create({ data: { email: 'only-in-copy@x.io' } })
    expect(await other.user.count({ where: { email: 'only-in-copy@x.io' } })).toBe(1)
    expect(await prisma.user.count({ where: { email: 'only-in-copy@x.io' } })).toBe(0)
    await other.$disconnect()
    await copy.close()
    await snap.close()
  })
})
