import { execFile } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { DriverAdapterError } from '@prisma/driver-adapter-utils'
import { PGlite } from '@pgwasm/pglite'
import { deferred } from '@pgwasm/test-support/async'
import { PrismaPGlite } from '../src/index.js'
import { Prisma } from './generated/client.js'
import { prismaForThisFile } from './helpers.js'

const { prisma, testDb } = await prismaForThisFile()

describe('transactions', () => {
  it('commits an interactive transaction', async () => {
    const result = await prisma.$transaction(async (tx) => {
      const user = await tx.user.create({ data: { email: 'tx@x.io' } })
      await tx.post.create({ data: { title: 'in tx', authorId: user.id } })
      return tx.post.count()
    })
    expect(result).toBe(1)
    expect(await prisma.post.count()).toBe(1)
  })

  it('rolls back an interactive transaction that throws', async () => {
    await expect(
      prisma.$transaction(async (tx) => {
        await tx.user.create({ data: { email: 'gone@x.io' } })
        expect(await tx.user.count()).toBe(1)
        throw new Error('abort')
      }),
    ).rejects.toThrow('abort')
    expect(await prisma.user.count()).toBe(0)
    expect(testDb.db.isInTransaction()).toBe(false)
  })

  it('rolls back when a statement inside the transaction fails', async () => {
    await prisma.user.create({ data: { email: 'taken@x.io' } })
    await expect(
      prisma.$transaction(async (tx) => {
        await tx.user.create({ data: { email: 'new@x.io' } })
        await tx.user.create({ data: { email: 'taken@x.io' } })
      }),
    ).rejects.toMatchObject({ code: 'P2002' })
    expect(await prisma.user.findMany({ select: { email: true } })).toEqual([{ email: 'taken@x.io' }])
  })

  it('runs a batch transaction atomically', async () => {
    const [user, count] = await prisma.$transaction([prisma.user.create({ data: { email: 'batch@x.io' } }), prisma.user.count()])
    expect(user.email).toBe('batch@x.io')
    expect(count).toBe(1)
    await expect(
      prisma.$transaction([prisma.user.create({ data: { email: 'second@x.io' } }), prisma.user.create({ data: { email: 'batch@x.io' } })]),
    ).rejects.toMatchObject({ code: 'P2002' })
    expect(await prisma.user.count()).toBe(1)
  })

  it('sets the isolation level PostgreSQL was asked for', async () => {
    const level = await prisma.$transaction((tx) => tx.$queryRaw<{ level: string }[]>`SELECT current_setting('transaction_isolation') AS level`, {
      isolationLevel: Prisma.TransactionIsolationLevel.Serializable,
    })
    expect(level).toEqual([{ level: 'serializable' }])
    const repeatable = await prisma.$transaction((tx) => tx.$queryRaw<{ level: string }[]>`SELECT current_setting('transaction_isolation') AS level`, {
      isolationLevel: Prisma.TransactionIsolationLevel.RepeatableRead,
    })
    expect(repeatable).toEqual([{ level: 'repeatable read' }])
  })

  it('keeps queries from outside the transaction out of it until it ends', async () => {
    const inside = deferred()
    const release = deferred()
    const tx = prisma.$transaction(async (t) => {
      await t.user.create({ data: { email: 'held@x.io' } })
      inside.resolve()
      await release.promise
      throw new Error('roll back')
    })
    await inside.promise
    // Queued behind the transaction: it must see neither the uncommitted row nor run inside the transaction.
    const outside = prisma.user.count()
    release.resolve()
    await expect(tx).rejects.toThrow('roll back')
    expect(await outside).toBe(0)
  })

  it('runs 20 concurrent interactive transactions and 40 plain queries with correct final counts', async () => {
    const user = await prisma.user.create({ data: { email: 'counter@x.io' } })
    const transactions = Array.from({ length: 20 }, (_, i) =>
      prisma.$transaction(async (tx) => {
        const current = await tx.user.findUniqueOrThrow({ where: { id: user.id }, select: { score: true } })
        await tx.post.create({ data: { title: `post ${i}`, authorId: user.id } })
        await tx.user.update({ where: { id: user.id }, data: { score: current.score + 1 } })
        return i
      }),
    )
    const plain = Array.from({ length: 40 }, (_, i) =>
      i % 2 === 0 ? prisma.user.update({ where: { id: user.id }, data: { visits: { increment: 1 } } }) : prisma.post.count(),
    )
    const results = await Promise.all([...transactions, ...plain])
    expect(results.slice(0, 20)).toEqual(Array.from({ length: 20 }, (_, i) => i))
    const final = await prisma.user.findUniqueOrThrow({ where: { id: user.id }, include: { _count: { select: { posts: true } } } })
    // Read-modify-write inside each transaction is exact only if they never interleaved.
    expect(final.score).toBe(20)
    expect(final.visits).toBe(20n)
    expect(final._count.posts).toBe(20)
  })

  it('rolls back a transaction Prisma timed out and frees the database for others', async () => {
    await expect(
      prisma.$transaction(
        async (tx) => {
          await tx.user.create({ data: { email: 'slow@x.io' } })
          await new Promise((resolve) => setTimeout(resolve, 300))
        },
        { timeout: 50 },
      ),
    ).rejects.toMatchObject({ code: 'P2028' })
    expect(await prisma.user.count()).toBe(0)
  })

  it('supports nested writes that Prisma wraps in its own transaction', async () => {
    await prisma.user.create({ data: { email: 'nested@x.io', posts: { create: [{ title: 'a' }, { title: 'b' }] } } })
    await expect(prisma.user.create({ data: { email: 'nested2@x.io', posts: { create: [{ title: 'a' }, { title: 'a' }] } } })).rejects.toMatchObject({
      code: 'P2002',
    })
    expect(await prisma.user.count()).toBe(1)
    expect(await prisma.post.count()).toBe(2)
  })

  it('sets READ UNCOMMITTED and READ COMMITTED as asked', async () => {
    const level = (isolationLevel: Prisma.TransactionIsolationLevel) =>
      prisma.$transaction((tx) => tx.$queryRaw<{ level: string }[]>`SELECT current_setting('transaction_isolation') AS level`, { isolationLevel })
    expect(await level(Prisma.TransactionIsolationLevel.ReadUncommitted)).toEqual([{ level: 'read uncommitted' }])
    expect(await level(Prisma.TransactionIsolationLevel.ReadCommitted)).toEqual([{ level: 'read committed' }])
  })

  it('refuses the Snapshot isolation level, which PostgreSQL does not have', async () => {
    // Prisma's client has no Snapshot for PostgreSQL; one passed anyway must not start a transaction.
    await expect(prisma.$transaction(async (tx) => tx.user.count(), { isolationLevel: 'Snapshot' as Prisma.TransactionIsolationLevel })).rejects.toThrow()
    expect(testDb.db.isInTransaction()).toBe(false)
    const adapter = await new PrismaPGlite(testDb.db).connect()
    const refused = await adapter.startTransaction('SNAPSHOT').catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(DriverAdapterError)
    expect((refused as DriverAdapterError).cause).toMatchObject({ kind: 'InvalidIsolationLevel', level: 'SNAPSHOT' })
    expect(testDb.db.isInTransaction()).toBe(false)
  })

  it('rolls a nested transaction back to its savepoint and keeps the outer one', async () => {
    await prisma.$transaction(async (tx) => {
      await tx.user.create({ data: { email: 'outer@x.io' } })
      await expect(
        tx.$transaction(async (inner) => {
          await inner.user.create({ data: { email: 'inner@x.io' } })
          throw new Error('undo the inner part')
        }),
      ).rejects.toThrow('undo the inner part')
      await tx.$transaction((inner) => inner.user.create({ data: { email: 'kept@x.io' } }))
    })
    expect((await prisma.user.findMany({ orderBy: { id: 'asc' }, select: { email: true } })).map((u) => u.email)).toEqual(['outer@x.io', 'kept@x.io'])
  })
})

describe('a transaction callback that queries the outer client', () => {
  // The deadlock Prisma documents: the outer query waits for the transaction,
  // which waits for it. Prisma's timeout timer is unref'd, so unless something
  // keeps the process alive a plain script used to exit silently with code 13.
  it('ends with Prisma\'s P2028 in a plain script instead of a silent exit', async () => {
    const scratch = fileURLToPath(new URL('../.tmp/', import.meta.url))
    mkdirSync(scratch, { recursive: true })
    const script = join(scratch, `outer-client-${process.pid}.mts`)
    const entry = fileURLToPath(new URL('../src/index.ts', import.meta.url))
    const client = fileURLToPath(new URL('./generated/client.ts', import.meta.url))
    writeFileSync(
      script,
      [
        `import { PGlite } from '@pgwasm/pglite'`,
        `import { PrismaPGlite, pushSchema } from ${JSON.stringify(entry)}`,
        `import { PrismaClient } from ${JSON.stringify(client)}`,
        `import { readFileSync } from 'node:fs'`,
        `const db = await PGlite.create()`,
        `await db.exec(readFileSync(${JSON.stringify(join(scratch, `outer-client-${process.pid}.sql`))}, 'utf8'))`,
        `const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })`,
        `try {`,
        `  await prisma.$transaction(async (tx) => { await tx.user.create({ data: { email: 'a@x.io' } }); await prisma.user.count() }, { timeout: 1000 })`,
        `  console.log('committed')`,
        `} catch (error) {`,
        `  console.log('rejected', (error as { code?: string }).code)`,
        `}`,
        `console.log('users', await prisma.user.count())`,
        `await prisma.$disconnect()`,
        `await db.close()`,
      ].join('\n'),
    )
    writeFileSync(join(scratch, `outer-client-${process.pid}.sql`), await createSql())
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(process.execPath, ['--import', 'tsx', script], { cwd: fileURLToPath(new URL('..', import.meta.url)), timeout: 60_000 }, (_e, stdout, stderr) =>
        resolve({ code: child.exitCode, stdout, stderr }),
      )
    })
    rmSync(script, { force: true })
    rmSync(join(scratch, `outer-client-${process.pid}.sql`), { force: true })
    expect(run.stderr).toBe('')
    expect(run.stdout).toBe('rejected P2028\nusers 0\n')
    expect(run.code).toBe(0)
  })
})

/** The SQL of the test schema, from the database this file's tests use. */
async function createSql(): Promise<string> {
  const { diffSchema } = await import('../src/index.js')
  const { SCHEMA } = await import('./helpers.js')
  return diffSchema({ to: { schema: SCHEMA } })
}

