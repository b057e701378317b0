/**
 * The stock path, for users who prefer it: Prisma's own `@prisma/adapter-pg`
 * with `pg`, reaching pgwasm in-process (createPgStream) or over TCP
 * (PGliteServer). The README's recipe, run as written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PrismaPg } from '@prisma/adapter-pg'
import { PGlite } from '@pgwasm/pglite'
import { PGliteServer, createPgStream } from '@pgwasm/pglite-socket'
import { pushSchema } from '../src/index.js'
import { PrismaClient } from './generated/client.js'
import { SCHEMA } from './helpers.js'

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
  await pushSchema(db, { schema: SCHEMA })
})

afterAll(async () => {
  await db.close()
})

async function exercise(prisma: PrismaClient, email: string): Promise<void> {
  const user = await prisma.user.create({ data: { email, roles: ['ADMIN'], profile: { a: 1 }, posts: { create: { title: `${email} post` } } } })
  const read = await prisma.user.findUniqueOrThrow({ where: { id: user.id }, include: { posts: true } })
  expect(read).toMatchObject({ email, roles: ['ADMIN'], profile: { a: 1 } })
  expect(read.posts).toHaveLength(1)
  await expect(prisma.user.create({ data: { email } })).rejects.toMatchObject({ code: 'P2002' })
  const count = await prisma.$transaction(async (tx) => {
    await tx.post.create({ data: { title: `${email} second`, authorId: user.id } })
    return tx.post.count({ where: { authorId: user.id } })
  })
  expect(count).toBe(2)
}

describe('@prisma/adapter-pg over @pgwasm/pglite-socket', () => {
  it('works in-process through createPgStream, with no socket', async () => {
    const prisma = new PrismaClient({ adapter: new PrismaPg({ stream: () => createPgStream(db), max: 4 }) })
    try {
      await exercise(prisma, 'stream@x.io')
    } finally {
      await prisma.$disconnect()
    }
  })

  it('works over TCP through PGliteServer', async () => {
    const server = new PGliteServer({ db, port: 0 })
    await server.start()
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: server.connectionString }) })
    try {
      await exercise(prisma, 'tcp@x.io')
    } finally {
      await prisma.$disconnect()
      await server.stop()
    }
  })
})
