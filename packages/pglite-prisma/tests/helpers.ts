/** Shared helpers of the pglite-prisma tests. */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeEach } from 'vitest'
import { TestDatabase } from '../src/index.js'
import { PrismaClient } from './generated/client.js'

/** The test schema (users, posts, an enum, Json, Decimal, DateTime, Bytes, BigInt, lists). */
export const SCHEMA_PATH = fileURLToPath(new URL('./fixtures/schema.prisma', import.meta.url))
export const SCHEMA = readFileSync(SCHEMA_PATH, 'utf8')

/**
 * This file's database and client: the schema applied once, and a fresh
 * copy of it before every test (the recipe the README documents).
 */
export async function prismaForThisFile(): Promise<{ prisma: PrismaClient; testDb: TestDatabase }> {
  const testDb = await TestDatabase.create({ schema: SCHEMA })
  const prisma = new PrismaClient({ adapter: testDb.adapter })
  beforeEach(() => testDb.reset())
  afterAll(async () => {
    await prisma.$disconnect()
    await testDb.close()
  })
  return { prisma, testDb }
}
