import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deferred } from '@pgwasm/test-support/async'
import { ClosedError, DatabaseError, PGlite, identifier, type Transaction } from '../src/index.js'

let db: PGlite
let tables = 0

beforeAll(async () => {
  db = await PGlite.create()
})

afterAll(async () => {
  await db?.close()
})

async function newTable(): Promise<string> {
  const name = `tx_${++tables}`
  await db.exec(`create table ${name} (id int primary key, note text)`)
  return name
}

async function count(table: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from ${table}`)
  return rows[0]!.n
}

describe('transaction()', () => {
  it('commits when the callback returns and resolves with its value', async () => {
    const t = await newTable()
    const value = await db.transaction(async (tx) => {
      await tx.query(`insert into ${t} values ($1, $2)`, [1, 'a'])
      await tx.query(`insert into ${t} values ($1, $2)`, [2, 'b'])
      return 'done'
    })
    expect(value).toBe('done')
    const { rows } = await db.query(`select id, note from ${t} order by id`)
    expect(rows).toEqual([
      { id: 1, note: 'a' },
      { id: 2, note: 'b' },
    ])
  })

  it('rolls back when the callback throws and rethrows the same error', async () => {
    const t = await newTable()
    const boom = new Error('boom')
    await expect(
      db.transaction(async (tx) => {
        await tx.query(`insert into ${t} values ($1)`, [1])
        throw boom
      }),
    ).rejects.toBe(boom)
    expect(await count(t)).toBe(0)
  })

  it('rolls back and rejects with the DatabaseError of a failed statement the callback did not catch', async () => {
    const t = await newTable()
    const error = await db
      .transaction(async (tx) => {
        await tx.query(`insert into ${t} values ($1)`, [1])
        await tx.query(`insert into ${t} values ($1)`, [1])
      })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DatabaseError)
    expect((error as DatabaseError).code).toBe('23505')
    expect(await count(t)).toBe(0)
  })

  it('rolls back on tx.rollback() and still resolves with the return value', async () => {
    const t = await newTable()
    const value = await db.transaction(async (tx) => {
      await tx.query(`insert into ${t} values ($1)`, [1])
      await tx.rollback()
      return 'rolled back'
    })
    expect(value).toBe('rolled back')
    expect(await count(t)).toBe(0)
  })

  it("rejects with DatabaseError 25P02 and commits nothing when a statement failed but the callback returned", async () => {
    const t = await newTable()
    const caught: unknown[] = []
    const error = await db
      .transaction(async (tx) => {
        await tx.query(`insert into ${t} values ($1)`, [1])
        await tx.query('select * from tx_no_such_table').catch((e: unknown) => caught.push(e))
        return 'returned'
      })
      .catch((e: unknown) => e)
    expect(caught).toHaveLength(1)
    expect((caught[0] as DatabaseError).code).toBe('42P01')
    expect(error).toBeInstanceOf(DatabaseError)
    expect((error as DatabaseError).code).toBe('25P02')
    expect(await count(t)).toBe(0)
  })

  it('rejects later statements of an aborted transaction with 25P02', async () => {
    const t = await newTable()
    const codes: string[] = []
    await db
      .transaction(async (tx) => {
        await tx.query('select 1/0').catch((e: DatabaseError) => codes.push(e.code))
        await tx.query(`insert into ${t} values (1)`).catch((e: DatabaseError) => codes.push(e.code))
      })
      .catch(() => {})
    expect(codes).toEqual(['22012', '25P02'])
  })

  describe('leaves the instance usable', () => {
    const outcomes: [string, (tx: Transaction, table: string) => Promise<unknown>][] = [
      ['a commit', async (tx, t) => tx.query(`insert into ${t} values (1)`)],
      [
        'a throw',
        async (tx, t) => {
          await tx.query(`insert into ${t} values (1)`)
          throw new Error('boom')
        },
      ],
      [
        'tx.rollback()',
        async (tx, t) => {
          await tx.query(`insert into ${t} values (1)`)
          await tx.rollback()
        },
      ],
      [
        'a failed statement the callback caught',
        async (tx) => {
          await tx.query('select * from tx_missing').catch(() => {})
        },
      ],
    ]

    it.each(outcomes)('runs a following query outside any transaction after %s', async (_label, body) => {
      const t = await newTable()
      await db.transaction((tx) => body(tx, t)).catch(() => {})
      const { rows } = await db.query('select $1::int as ok', [1])
      expect(rows).toEqual([{ ok: 1 }])
      expect(db.isInTransaction()).toBe(false)
      const [status] = await db.exec("select pg_current_xact_id_if_assigned() is null as idle, now() = statement_timestamp() as fresh")
      expect(status!.rows).toEqual([{ idle: true, fresh: true }])
    })
  })

  it('reports isInTransaction inside the callback', async () => {
    const inside = await db.transaction(async (tx) => {
      await tx.query('select 1')
      return db.isInTransaction()
    })
    expect(inside).toBe(true)
    expect(db.isInTransaction()).toBe(false)
  })

  it('runs tx.sql with template values as parameters and commits', async () => {
    const t = await newTable()
    const note = "it's; drop table x"
    const selected = await db.transaction(async (tx) => {
      await tx.sql`insert into ${identifier`${t}`} values (${1}, ${note})`
      return (await tx.sql`select note from ${identifier`${t}`} where id = ${1}`).rows
    })
    expect(selected).toEqual([{ note }])
    expect(await count(t)).toBe(1)
  })

  it('runs several statements with tx.exec and commits them', async () => {
    const t = await newTable()
    const results = await db.transaction((tx) =>
      tx.exec(`insert into ${t} values (1, 'a'); insert into ${t} values (2, 'b'); select count(*)::int as n from ${t}`),
    )
    expect(results.map((r) => r.command)).toEqual(['INSERT', 'INSERT', 'SELECT'])
    expect(results[2]!.rows).toEqual([{ n: 2 }])
    expect(await count(t)).toBe(2)
  })

  it('rejects a query on a transaction that finished with ClosedError', async () => {
    let saved: Transaction | undefined
    await db.transaction(async (tx) => {
      saved = tx
    })
    expect(saved!.closed).toBe(true)
    await expect(saved!.query('select 1')).rejects.toBeInstanceOf(ClosedError)
    await expect(saved!.exec('select 1')).rejects.toBeInstanceOf(ClosedError)
  })

  it('rejects a query after tx.rollback() with ClosedError', async () => {
    const error = await db.transaction(async (tx) => {
      await tx.rollback()
      return tx.query('select 1').then(
        () => undefined,
        (e: unknown) => e,
      )
    })
    expect(error).toBeInstanceOf(ClosedError)
  })

  it('reports tx.closed false while running and true after it finished', async () => {
    let saved: Transaction | undefined
    const during = await db.transaction(async (tx) => {
      saved = tx
      return tx.closed
    })
    expect(during).toBe(false)
    expect(saved!.closed).toBe(true)
  })

  it('makes db.query calls issued during a transaction wait and see the committed data', async () => {
    const t = await newTable()
    const firstInsertDone = deferred()
    const release = deferred()
    const order: string[] = []
    const transaction = db.transaction(async (tx) => {
      await tx.query(`insert into ${t} values (1)`)
      firstInsertDone.resolve()
      await release.promise
      await tx.query(`insert into ${t} values (2)`)
      order.push('transaction body done')
    })
    await firstInsertDone.promise
    const concurrent = db.query<{ n: number }>(`select count(*)::int as n from ${t}`).then((r) => {
      order.push('concurrent query done')
      return r.rows[0]!.n
    })
    release.resolve()
    await transaction
    expect(await concurrent).toBe(2)
    expect(order).toEqual(['transaction body done', 'concurrent query done'])
  })

  it('makes a concurrent db.query wait for a transaction that rolls back and see no rows', async () => {
    const t = await newTable()
    const inserted = deferred()
    const release = deferred()
    const transaction = db.transaction(async (tx) => {
      await tx.query(`insert into ${t} values (1)`)
      inserted.resolve()
      await release.promise
      throw new Error('abandon')
    })
    await inserted.promise
    const concurrent = db.query<{ n: number }>(`select count(*)::int as n from ${t}`)
    release.resolve()
    await expect(transaction).rejects.toThrow('abandon')
    expect((await concurrent).rows).toEqual([{ n: 0 }])
  })

  it('runs tx.query calls started together with Promise.all inside the callback', async () => {
    const t = await newTable()
    const results = await db.transaction(async (tx) => {
      await Promise.all(Array.from({ length: 50 }, (_, i) => tx.query(`insert into ${t} values ($1, $2)`, [i, `n${i}`])))
      return Promise.all(Array.from({ length: 50 }, (_, i) => tx.query<{ note: string }>(`select note from ${t} where id = $1`, [i])))
    })
    expect(results.map((r) => r.rows[0]!.note)).toEqual(Array.from({ length: 50 }, (_, i) => `n${i}`))
    expect(await count(t)).toBe(50)
  })
})
