// `formatQuery` from the root entry: the text it makes runs on the engine
// and returns what the parameterized query returns.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DatabaseError, PGlite, formatQuery } from '@pgwasm/pglite'

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
  await db.exec(`
    CREATE TABLE fq (id int PRIMARY KEY, flag boolean, label text, doc jsonb, tags text[], at timestamptz);
    INSERT INTO fq VALUES
      (1, true, 'it''s', '{"k": 1}', '{a,b}', '2020-01-01T00:00:00Z'),
      (2, false, '50%', '{"k": [2]}', '{"c d"}', '2021-06-01T12:00:00Z')
  `)
})

afterAll(async () => {
  await db.close()
})

describe('formatQuery', () => {
  it('splices typed values in so the text returns what the parameterized query does', async () => {
    const sql = 'SELECT id FROM fq WHERE flag = $1 AND label = $2 AND doc = $3 AND tags = $4 AND at = $5'
    const params = [true, "it's", { k: 1 }, ['a', 'b'], new Date('2020-01-01T00:00:00Z')]
    const text = await formatQuery(db, sql, params)
    expect(text).not.toContain('$')
    expect((await db.query(text)).rows).toEqual((await db.query(sql, params)).rows)
    expect((await db.query(text)).rows).toEqual([{ id: 1 }])
  })

  it('writes values as the server prints their type', async () => {
    expect(await formatQuery(db, 'SELECT * FROM fq WHERE doc = $1', [{ k: 'v' }])).toBe(`SELECT * FROM fq WHERE doc = '{"k": "v"}'`)
    expect(await formatQuery(db, 'SELECT * FROM fq WHERE flag = $1 OR id = $2', [false, 7])).toBe("SELECT * FROM fq WHERE flag = 'f' OR id = '7'")
  })

  it('replaces parameters out of order and more than once', async () => {
    const text = await formatQuery(db, 'SELECT id FROM fq WHERE label = $2 OR label = $2 OR id = $1', [1, '50%'])
    expect(text).toBe("SELECT id FROM fq WHERE label = '50%' OR label = '50%' OR id = '1'")
  })

  it('leaves $n and % inside literals, quoted names and comments alone', async () => {
    const sql = `SELECT '$1 %s' AS "$2%", $$ $1 $$ AS body, $1::text AS v -- $1 %\n`
    const text = await formatQuery(db, sql, ['x'])
    expect(text).toBe(`SELECT '$1 %s' AS "$2%", $$ $1 $$ AS body, 'x'::text AS v -- $1 %\n`)
    expect((await db.query(text)).rows).toEqual([{ '$2%': '$1 %s', body: ' $1 ', v: 'x' }])
  })

  it('formats inside a transaction and sees its uncommitted tables', async () => {
    await db.transaction(async (tx) => {
      await tx.exec('CREATE TABLE fq_tx (n int)')
      const text = await formatQuery(db, 'INSERT INTO fq_tx VALUES ($1)', [5], tx)
      expect(text).toBe("INSERT INTO fq_tx VALUES ('5')")
      await tx.rollback()
    })
  })

  it('returns a query without parameters as is', async () => {
    expect(await formatQuery(db, 'SELECT 1')).toBe('SELECT 1')
  })

  it('rejects with a DatabaseError when the query does not prepare', async () => {
    await expect(formatQuery(db, 'SELECT * FROM missing_table WHERE id = $1', [1])).rejects.toBeInstanceOf(DatabaseError)
  })
})
