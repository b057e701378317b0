import { describe, expect, it } from 'vitest'
import { Prisma } from './generated/client.js'
import { prismaForThisFile } from './helpers.js'

const { prisma } = await prismaForThisFile()

async function caught(promise: Promise<unknown>): Promise<Prisma.PrismaClientKnownRequestError> {
  try {
    await promise
  } catch (error) {
    expect(error).toBeInstanceOf(Prisma.PrismaClientKnownRequestError)
    return error as Prisma.PrismaClientKnownRequestError
  }
  throw new Error('expected the call to fail')
}

describe('errors as Prisma users know them', () => {
  it('reports a unique violation as P2002 with the constraint and model', async () => {
    await prisma.user.create({ data: { email: 'dup@x.io' } })
    const error = await caught(prisma.user.create({ data: { email: 'dup@x.io' } }))
    expect(error.code).toBe('P2002')
    expect(error.message).toContain('User_email_key')
    expect(error.meta).toMatchObject({ modelName: 'User', driverAdapterError: { cause: { kind: 'UniqueConstraintViolation', constraint: { index: 'User_email_key' } } } })
  })

  it('reports a compound unique violation as P2002', async () => {
    const user = await prisma.user.create({ data: { email: 'a@x.io', posts: { create: { title: 'same' } } } })
    const error = await caught(prisma.post.create({ data: { title: 'same', authorId: user.id } }))
    expect(error.code).toBe('P2002')
    expect(error.message).toContain('Post_authorId_title_key')
  })

  it('reports a foreign key violation as P2003', async () => {
    const error = await caught(prisma.post.create({ data: { title: 'orphan', authorId: 12345 } }))
    expect(error.code).toBe('P2003')
    expect(error.message).toContain('Post_authorId_fkey')
  })

  it('reports deleting a row a RESTRICT foreign key references as P2003', async () => {
    const user = await prisma.user.create({ data: { email: 'ref@x.io', posts: { create: { title: 'keeps me' } } } })
    const error = await caught(prisma.$executeRaw`DELETE FROM "User" WHERE id = ${user.id}`)
    expect(error.code).toBe('P2010')
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'RestrictViolation', originalCode: '23001' } } })
    const viaModel = await caught(prisma.user.delete({ where: { id: user.id } }))
    expect(viaModel.code).toBe('P2003')
  })

  it('reports a missing record as P2025', async () => {
    const error = await caught(prisma.user.update({ where: { id: 999 }, data: { name: 'x' } }))
    expect(error.code).toBe('P2025')
    expect((await caught(prisma.user.findUniqueOrThrow({ where: { id: 999 } }))).code).toBe('P2025')
  })

  it('reports a value too long for its column as P2000', async () => {
    await prisma.$executeRawUnsafe('ALTER TABLE "User" ALTER COLUMN name TYPE varchar(3)')
    const error = await caught(prisma.user.create({ data: { email: 'long@x.io', name: 'too long' } }))
    expect(error.code).toBe('P2000')
    expect(error.meta).toMatchObject({ modelName: 'User', driverAdapterError: { cause: { kind: 'LengthMismatch', originalCode: '22001' } } })
  })

  it('reports a raw query whose value is too long as P2010 carrying the length mismatch', async () => {
    await prisma.$executeRawUnsafe('ALTER TABLE "User" ADD COLUMN short varchar(3)')
    const error = await caught(prisma.$executeRawUnsafe(`UPDATE "User" SET short = 'too long'`))
    expect(error.code).toBe('P2010')
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'LengthMismatch', originalCode: '22001' } } })
  })

  it('reports a NOT NULL violation as P2011 naming the column', async () => {
    // Optional in the schema, required in the database: only PostgreSQL can refuse the row.
    await prisma.$executeRawUnsafe('ALTER TABLE "User" ALTER COLUMN name SET NOT NULL')
    const error = await caught(prisma.user.create({ data: { email: 'nameless@x.io' } }))
    expect(error.code).toBe('P2011')
    expect(error.message).toContain('name')
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'NullConstraintViolation', constraint: { fields: ['name'] }, originalCode: '23502' } } })
  })

  it('reports a value out of its column\'s range as P2020', async () => {
    // balance is Decimal(12, 2): ten integer digits at most.
    const error = await caught(prisma.user.create({ data: { email: 'rich@x.io', balance: '123456789012.5' } }))
    expect(error.code).toBe('P2020')
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'ValueOutOfRange', originalCode: '22003' } } })
  })

  // One session has no concurrent writer to conflict with, so a trigger raises
  // the SQLSTATEs PostgreSQL gives a losing transaction.
  it.each([
    ['a serialization failure', '40001'],
    ['a deadlock', '40P01'],
  ])('reports %s as P2034', async (_name, sqlstate) => {
    await prisma.$executeRawUnsafe(
      `CREATE FUNCTION lose() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'lost' USING ERRCODE = '${sqlstate}'; END $$`,
    )
    await prisma.$executeRawUnsafe('CREATE TRIGGER lose BEFORE INSERT ON "User" FOR EACH ROW EXECUTE FUNCTION lose()')
    const error = await caught(prisma.user.create({ data: { email: 'loser@x.io' } }))
    expect(error.code).toBe('P2034')
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'TransactionWriteConflict', originalCode: sqlstate } } })
    expect(await prisma.user.count()).toBe(0)
  })

  it('names the missing table of a raw query from the error position, not the message', async () => {
    const error = await caught(prisma.$queryRawUnsafe('SELECT * FROM "Missing" m'))
    expect(error.code).toBe('P2010')
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'TableDoesNotExist', table: 'Missing', originalCode: '42P01' } } })
  })

  it('names the missing column of a raw query', async () => {
    const error = await caught(prisma.$queryRawUnsafe('SELECT u.nope FROM "User" u'))
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'ColumnNotFound', column: 'u.nope', originalCode: '42703' } } })
  })

  it('passes other PostgreSQL errors through with their SQLSTATE', async () => {
    const error = await caught(prisma.$queryRawUnsafe('SELECT 1/0'))
    expect(error.code).toBe('P2010')
    expect(error.meta).toMatchObject({ driverAdapterError: { cause: { kind: 'postgres', code: '22012', originalCode: '22012' } } })
  })

  it('keeps the database usable after errors', async () => {
    await caught(prisma.$queryRawUnsafe('SELECT * FROM nowhere'))
    expect(await prisma.user.count()).toBe(0)
  })
})
