import { ITEM_ROWS, type BenchPrisma } from './prisma-client.js'

/**
 * The prisma suite's cases as functions of a client, shared by the suite
 * process and the bridge's child process so every path runs the same calls.
 */

export const FIND_MANY = 'findMany({ take: 100 })'
export const FIND_UNIQUE = 'findUnique by id'
export const CREATE = 'create one'
export const UPDATE = 'update one'
export const TRANSACTION = 'interactive transaction (findUnique + update)'
/** In run order: reads first, so the writes cannot change what they read. */
export const PRISMA_CASES = [FIND_MANY, FIND_UNIQUE, CREATE, UPDATE, TRANSACTION] as const
export type PrismaCase = (typeof PRISMA_CASES)[number]

export function isPrismaCase(name: string): name is PrismaCase {
  return (PRISMA_CASES as readonly string[]).includes(name)
}

/** Ids of the seeded rows, visited in a fixed scattered order. */
function seededId(i: number): number {
  return ((i * 37) % ITEM_ROWS) + 1
}

/**
 * The timed function of one case. Each call checks its result, so a path
 * that quietly returns nothing fails instead of looking fast.
 */
export function prismaTask(name: PrismaCase, prisma: BenchPrisma): () => Promise<unknown> {
  let i = 0
  switch (name) {
    case FIND_MANY:
      return async () => {
        const rows = await prisma.item.findMany({ take: 100 })
        if (rows.length !== 100) throw new Error(`findMany returned ${rows.length} rows, expected 100`)
      }
    case FIND_UNIQUE:
      return async () => {
        const id = seededId(i++)
        const row = await prisma.item.findUnique({ where: { id } })
        if (row?.id !== id || !(row.createdAt instanceof Date)) throw new Error(`findUnique(${id}) returned ${JSON.stringify(row)}`)
      }
    case CREATE:
      return async () => {
        const n = i++
        const row = await prisma.item.create({ data: { name: `created ${n}`, qty: n } })
        if (row.qty !== n) throw new Error(`create returned qty ${row.qty}, expected ${n}`)
      }
    case UPDATE:
      return async () => {
        const n = i++
        const row = await prisma.item.update({ where: { id: seededId(n) }, data: { qty: n } })
        if (row.qty !== n) throw new Error(`update returned qty ${row.qty}, expected ${n}`)
      }
    case TRANSACTION:
      return () =>
        prisma.$transaction(async (tx) => {
          const id = seededId(i++)
          const row = await tx.item.findUnique({ where: { id } })
          if (!row) throw new Error(`row ${id} missing inside the transaction`)
          await tx.item.update({ where: { id }, data: { qty: row.qty + 1 } })
        })
  }
}

/** Suite process -> bridge child (Node IPC). */
export type BridgeRequest =
  /** `ours`: our adapter on a pgwasm database in the child, to compare with the bridge on the same Node. */
  | { type: 'setup'; target: 'bridge' | 'ours' }
  | { type: 'round'; seq: number; case: PrismaCase; iterations: number; warmup: number }
  | { type: 'close' }

/** Bridge child -> suite process. */
export type BridgeReply =
  | { type: 'ready'; node: string; polyfilled: string[] }
  | { type: 'samples'; seq: number; samples: number[] }
  | { type: 'error'; seq?: number; message: string }
