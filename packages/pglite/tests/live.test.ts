import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serialize } from 'pg-protocol'
import type PgModule from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'
import { createLive, live, LIVE_TRIGGER, type Change, type LiveHandle, type PGliteWithLive } from '../src/live/index.js'
import { PGliteServer } from '../../pglite-socket/src/index.js'

// pg is a devDependency of the socket package, not of this one.
const pg = createRequire(new URL('../../pglite-socket/package.json', import.meta.url))('pg') as typeof PgModule

type Row = Record<string, unknown>

let db: PGliteWithLive

beforeAll(async () => {
  db = await PGlite.create({ extensions: { live } })
})

afterAll(async () => {
  await db?.close()
})

/** Records a callback's values; `until(n)` resolves with the n-th. */
function recorder<T>(): { values: T[]; callback: (value: T) => void; until: (n: number) => Promise<T>; untilMatch: (test: (value: T) => boolean) => Promise<T> } {
  const values: T[] = []
  const waiters: { test: (value: T, index: number) => boolean; resolve: (value: T) => void }[] = []
  const callback = (value: T): void => {
    values.push(value)
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.test(value, values.length)) waiters.splice(i, 1)[0]!.resolve(value)
    }
  }
  const wait = (test: (value: T, index: number) => boolean): Promise<T> => {
    const index = values.findIndex((v, i) => test(v, i + 1))
    if (index >= 0) return Promise.resolve(values[index]!)
    return new Promise<T>((resolve) => waiters.push({ test, resolve }))
  }
  return {
    values,
    callback,
    until: (n) => wait((_v, i) => i === n),
    untilMatch: (test) => wait((v) => test(v)),
  }
}

/** A fresh table name per test, so tests do not see each other's writes. */
let tableCount = 0
async function table(columns = 'id int primary key, v text'): Promise<string> {
  const name = `lt_${++tableCount}`
  await db.exec(`create table ${name} (${columns})`)
  return name
}

async function triggersOn(name: string): Promise<string[]> {
  const { rows } = await db.query<{ tgname: string }>(
    `select tgname from pg_trigger where not tgisinternal and tgrelid = to_regclass($1)`,
    [name],
  )
  return rows.map((r) => r.tgname)
}

/** Deterministic pseudo-random numbers in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

describe('live.query', () => {
  it('calls back with the initial results before it resolves', async () => {
    const t = await table()
    await db.query(`insert into ${t} values (1, 'a')`)
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select * from ${t} order by id`, [], rec.callback)
    expect(rec.values.map((r) => r.rows)).toEqual([[{ id: 1, v: 'a' }]])
    expect(lq.initialResults.rows).toEqual([{ id: 1, v: 'a' }])
    await lq.unsubscribe()
  })

  it('sees an insert', async () => {
    const t = await table()
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select * from ${t} order by id`, [], rec.callback)
    await db.query(`insert into ${t} values ($1, $2)`, [1, 'a'])
    expect((await rec.until(2)).rows).toEqual([{ id: 1, v: 'a' }])
    await lq.unsubscribe()
  })

  it('sees an update', async () => {
    const t = await table()
    await db.query(`insert into ${t} values (1, 'a')`)
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select * from ${t} order by id`, [], rec.callback)
    await db.query(`update ${t} set v = 'b' where id = 1`)
    expect((await rec.until(2)).rows).toEqual([{ id: 1, v: 'b' }])
    await lq.unsubscribe()
  })

  it('sees a delete', async () => {
    const t = await table()
    await db.query(`insert into ${t} values (1, 'a'), (2, 'b')`)
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select * from ${t} order by id`, [], rec.callback)
    await db.query(`delete from ${t} where id = 1`)
    expect((await rec.until(2)).rows).toEqual([{ id: 2, v: 'b' }])
    await lq.unsubscribe()
  })

  it('sees a truncate', async () => {
    const t = await table()
    await db.query(`insert into ${t} values (1, 'a')`)
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select * from ${t}`, [], rec.callback)
    await db.exec(`truncate ${t}`)
    expect((await rec.until(2)).rows).toEqual([])
    await lq.unsubscribe()
  })

  it('sees the writes of a transaction once, after its commit', async () => {
    const t = await table()
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select count(*)::int as n, max(id) as last from ${t}`, [], rec.callback)
    let seenInside = -1
    await db.transaction(async (tx) => {
      for (let i = 1; i <= 1000; i++) await tx.query(`insert into ${t} values ($1, 'x')`, [i])
      seenInside = rec.values.length
    })
    expect(seenInside).toBe(1)
    expect((await rec.until(2)).rows).toEqual([{ n: 1000, last: 1000 }])
    // A write after: its refresh must be the next callback, so the commit caused exactly one.
    await db.query(`insert into ${t} values (5000, 'sentinel')`)
    await rec.untilMatch((r) => r.rows[0]?.last === 5000)
    expect(rec.values.map((r) => r.rows[0])).toEqual([
      { n: 0, last: null },
      { n: 1000, last: 1000 },
      { n: 1001, last: 5000 },
    ])
    await lq.unsubscribe()
  })

  it('sees nothing of a rolled-back transaction', async () => {
    const t = await table()
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select id from ${t} order by id`, [], rec.callback)
    await expect(
      db.transaction(async (tx) => {
        await tx.query(`insert into ${t} values (1, 'x')`)
        throw new Error('abort')
      }),
    ).rejects.toThrow('abort')
    await db.transaction(async (tx) => {
      await tx.query(`insert into ${t} values (2, 'x')`)
      await tx.rollback()
    })
    await db.query(`insert into ${t} values (3, 'sentinel')`)
    await rec.until(2)
    expect(rec.values.map((r) => r.rows)).toEqual([[], [{ id: 3 }]])
    await lq.unsubscribe()
  })

  it('sees a write made through exec()', async () => {
    const t = await table()
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select id from ${t}`, [], rec.callback)
    await db.exec(`insert into ${t} values (1, 'a'); insert into ${t} values (2, 'b')`)
    expect((await rec.until(2)).rows).toEqual([{ id: 1 }, { id: 2 }])
    await lq.unsubscribe()
  })

  it('sees a write made through the raw protocol', async () => {
    const t = await table()
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select id from ${t}`, [], rec.callback)
    await db.execProtocolRaw(serialize.query(`insert into ${t} values (7, 'raw')`))
    expect((await rec.until(2)).rows).toEqual([{ id: 7 }])
    await lq.unsubscribe()
  })

  it('sees a write made under a lease, after the lease is released', async () => {
    const t = await table()
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select id from ${t}`, [], rec.callback)
    const lease = await db.lease()
    lease.execProtocolRawStream(serialize.query(`insert into ${t} values (8, 'lease')`), () => {})
    lease.release()
    expect((await rec.until(2)).rows).toEqual([{ id: 8 }])
    await lq.unsubscribe()
  })

  it('follows the base tables of a view and of a join', async () => {
    const a = await table()
    const b = await table('id int primary key, a_id int')
    await db.exec(`create view ${a}_v as select ${a}.id, count(${b}.id)::int as n from ${a} left join ${b} on ${b}.a_id = ${a}.id group by ${a}.id`)
    await db.query(`insert into ${a} values (1, 'a')`)
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select * from ${a}_v`, [], rec.callback)
    await db.query(`insert into ${b} values (1, 1)`)
    expect((await rec.until(2)).rows).toEqual([{ id: 1, n: 1 }])
    expect(await triggersOn(b)).toEqual([LIVE_TRIGGER])
    await lq.unsubscribe()
  })

  it('sees a write to one partition of a partitioned table it reads', async () => {
    await db.exec(`
      create table lt_parts (id int, k int) partition by range (k);
      create table lt_parts_lo partition of lt_parts for values from (0) to (10);
      create table lt_parts_hi partition of lt_parts for values from (10) to (20);
    `)
    const rec = recorder<{ rows: Row[] }>()
    // Plan-time pruning leaves only lt_parts_lo in the plan.
    const lq = await db.live.query(`select count(*)::int as n from lt_parts where k < $1`, [5], rec.callback)
    await db.query(`insert into lt_parts_lo values (1, 1)`)
    expect((await rec.until(2)).rows).toEqual([{ n: 1 }])
    await db.query(`insert into lt_parts values (2, 2)`)
    expect((await rec.until(3)).rows).toEqual([{ n: 2 }])
    await lq.unsubscribe()
    const { rows } = await db.query(`select count(*)::int as n from pg_trigger where tgname = $1`, [LIVE_TRIGGER])
    expect(rows).toEqual([{ n: 0 }])
  })

  it('refreshes only the live queries that read the changed table', async () => {
    const a = await table()
    const b = await table()
    const recA = recorder<{ rows: Row[] }>()
    const recB = recorder<{ rows: Row[] }>()
    const lqA = await db.live.query(`select id from ${a}`, [], recA.callback)
    const lqB = await db.live.query(`select id from ${b}`, [], recB.callback)
    await db.query(`insert into ${a} values (1, 'a')`)
    await recA.until(2)
    await db.query(`insert into ${b} values (1, 'b')`)
    await recB.until(2)
    expect(recB.values.map((r) => r.rows)).toEqual([[], [{ id: 1 }]])
    expect(recA.values).toHaveLength(2)
    await lqA.unsubscribe()
    await lqB.unsubscribe()
  })

  it('refreshes each of 100 live queries on one table once for 1,000 writes in a transaction', async () => {
    const t = await table()
    const recs = Array.from({ length: 100 }, () => recorder<{ rows: Row[] }>())
    const lqs = await Promise.all(
      recs.map((rec, i) =>
        db.live.query(`select count(*) filter (where id % 100 = $1)::int as n, max(id) as last from ${t}`, [i], rec.callback),
      ),
    )
    await db.transaction(async (tx) => {
      for (let i = 1; i <= 1000; i++) await tx.query(`insert into ${t} values ($1, 'x')`, [i])
    })
    await db.query(`insert into ${t} values (100000, 'sentinel')`)
    await Promise.all(recs.map((rec) => rec.untilMatch((r) => r.rows[0]?.last === 100000)))
    for (const [i, rec] of recs.entries()) {
      expect(rec.values.map((r) => r.rows[0])).toEqual([
        { n: 0, last: null },
        { n: 10, last: 1000 },
        { n: i === 0 ? 11 : 10, last: 100000 },
      ])
    }
    expect(await triggersOn(t)).toEqual([LIVE_TRIGGER])
    await Promise.all(lqs.map((lq) => lq.unsubscribe()))
    expect(await triggersOn(t)).toEqual([])
  })

  it('keeps a table trigger until the last of its live queries unsubscribes, then leaves nothing behind', async () => {
    const t = await table()
    const first = await db.live.query(`select * from ${t}`, [], () => {})
    const second = await db.live.query(`select id from ${t}`, [], () => {})
    expect(await triggersOn(t)).toEqual([LIVE_TRIGGER])
    await first.unsubscribe()
    expect(await triggersOn(t)).toEqual([LIVE_TRIGGER])
    await second.unsubscribe()
    expect(await triggersOn(t)).toEqual([])
    const { rows } = await db.query(`select count(*)::int as n from pg_proc where proname like 'pgwasm_live%'`)
    expect(rows).toEqual([{ n: 0 }])
  })

  it('stops calling back after unsubscribe', async () => {
    const t = await table()
    const gone = recorder<{ rows: Row[] }>()
    const kept = recorder<{ rows: Row[] }>()
    const lqGone = await db.live.query(`select id from ${t}`, [], gone.callback)
    const lqKept = await db.live.query(`select id from ${t}`, [], kept.callback)
    await lqGone.unsubscribe()
    await db.query(`insert into ${t} values (1, 'a')`)
    await kept.until(2)
    expect(gone.values).toHaveLength(1)
    await lqKept.unsubscribe()
  })

  it('ends a live query when its abort signal fires', async () => {
    const t = await table()
    const controller = new AbortController()
    const rec = recorder<{ rows: Row[] }>()
    await db.live.query({ query: `select id from ${t}`, callback: rec.callback, signal: controller.signal })
    const other = recorder<{ rows: Row[] }>()
    const lqOther = await db.live.query(`select id from ${t}`, [], other.callback)
    controller.abort()
    await db.query(`insert into ${t} values (1, 'a')`)
    await other.until(2)
    expect(rec.values).toHaveLength(1)
    await lqOther.unsubscribe()
  })

  it('refresh() re-runs the query and resolves after the callback', async () => {
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select 1 as one`, [], rec.callback)
    await lq.refresh()
    expect(rec.values).toHaveLength(2)
    await lq.unsubscribe()
  })

  it('passes subscribed callbacks every later refresh', async () => {
    const t = await table()
    const lq = await db.live.query(`select id from ${t}`)
    const rec = recorder<{ rows: Row[] }>()
    lq.subscribe(rec.callback)
    await db.query(`insert into ${t} values (1, 'a')`)
    expect((await rec.until(1)).rows).toEqual([{ id: 1 }])
    await lq.unsubscribe()
  })

  it('shows a window of the results with the total count, and moves it on refresh', async () => {
    const t = await table()
    await db.query(`insert into ${t} select i, 'x' from generate_series(1, 10) i`)
    const rec = recorder<{ rows: Row[]; totalCount?: number; offset?: number; limit?: number }>()
    const lq = await db.live.query({ query: `select id from ${t} order by id;`, offset: 2, limit: 3, callback: rec.callback })
    expect(lq.initialResults).toMatchObject({ rows: [{ id: 3 }, { id: 4 }, { id: 5 }], totalCount: 10, offset: 2, limit: 3 })
    await db.query(`delete from ${t} where id = 1`)
    expect(await rec.until(2)).toMatchObject({ rows: [{ id: 4 }, { id: 5 }, { id: 6 }], totalCount: 9 })
    await lq.refresh({ offset: 7 })
    expect(rec.values[2]).toMatchObject({ rows: [{ id: 9 }, { id: 10 }], totalCount: 9, offset: 7, limit: 3 })
    await lq.unsubscribe()
  })

  it('rejects an offset without a limit', async () => {
    await expect(db.live.query({ query: 'select 1', offset: 1 })).rejects.toThrow('offset and limit must be provided together')
  })
})

describe('live.incrementalQuery', () => {
  it('matches a re-run of the query after each round of random edits to a 1,000-row table', async () => {
    const t = await table('id int primary key, name text, score int, tags text[]')
    await db.query(`insert into ${t} select i, 'n' || i, (i * 7919) % 1000, array['t' || (i % 5)] from generate_series(1, 1000) i`)
    const sql = `select * from ${t} where score % 3 <> 0 order by score, id`
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.incrementalQuery(sql, [], 'id', rec.callback)
    expect(lq.initialResults.rows).toEqual((await db.query(sql)).rows)
    const rnd = random(42)
    let nextId = 1001
    for (let round = 1; round <= 10; round++) {
      await db.transaction(async (tx) => {
        for (let op = 0; op < 40; op++) {
          const id = 1 + Math.floor(rnd() * nextId)
          const kind = rnd()
          if (kind < 0.3) await tx.query(`insert into ${t} values ($1, $2, $3, $4)`, [nextId++, `new${round}`, Math.floor(rnd() * 1000), ['n']])
          else if (kind < 0.6) await tx.query(`update ${t} set score = $2 where id = $1`, [id, Math.floor(rnd() * 1000)])
          else if (kind < 0.8) await tx.query(`update ${t} set name = name || '!', tags = tags || 'u'::text where id = $1`, [id])
          else await tx.query(`delete from ${t} where id = $1`, [id])
        }
      })
      const results = await rec.until(round + 1)
      expect(results.rows).toEqual((await db.query(sql)).rows)
    }
    await lq.unsubscribe()
  })

  it('keeps the objects of unchanged rows, and the whole results when nothing changed', async () => {
    const t = await table('id int primary key, v text, at timestamptz, data jsonb')
    await db.query(`insert into ${t} values (1, 'a', '2024-01-01', '{"x":[1]}'), (2, 'b', '2024-01-02', '{"y":2}')`)
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.incrementalQuery(`select * from ${t} order by id`, [], 'id', rec.callback)
    await db.query(`update ${t} set v = 'B' where id = 2`)
    const second = await rec.until(2)
    expect(second.rows[0]).toBe(rec.values[0]!.rows[0])
    expect(second.rows[1]).toEqual({ id: 2, v: 'B', at: new Date('2024-01-02'), data: { y: 2 } })
    await db.query(`update ${t} set v = v`)
    expect(await rec.until(3)).toBe(second)
    await lq.unsubscribe()
  })

  it('rejects a key that is not a column of the results', async () => {
    await expect(db.live.incrementalQuery('select 1 as one', [], 'id')).rejects.toThrow('"id"')
    const { rows } = await db.query(`select count(*)::int as n from pg_trigger where tgname = $1`, [LIVE_TRIGGER])
    expect(rows).toEqual([{ n: 0 }])
  })
})

/** A client's copy of the results, kept up to date by applying changes. */
class ChangeFollower {
  readonly #rows = new Map<unknown, { row: Row; after: unknown }>()

  apply(changes: Array<Change<Row>>): void {
    for (const change of changes) {
      if (change.__op__ === 'RESET') {
        this.#rows.clear()
        continue
      }
      const { __op__, __changed_columns__, __after__, ...columns } = change
      if (__op__ === 'INSERT') this.#rows.set(columns.id, { row: columns, after: __after__ })
      else if (__op__ === 'DELETE') this.#rows.delete(columns.id)
      else {
        const entry = this.#rows.get(columns.id)!
        for (const name of __changed_columns__) {
          if (name === '__after__') entry.after = __after__
          else entry.row[name] = columns[name]
        }
      }
    }
  }

  /** The rows in order, following each row's `__after__` link from the first. */
  ordered(): Row[] {
    const byAfter = new Map<unknown, Row>()
    for (const { row, after } of this.#rows.values()) byAfter.set(after, row)
    const out: Row[] = []
    let previous: unknown = null
    for (let row = byAfter.get(previous); row; row = byAfter.get(previous)) {
      out.push(row)
      previous = row.id
    }
    return out
  }
}

describe('live.changes', () => {
  it('reports inserts, updates and deletes by key, shaped as PGlite does', async () => {
    const t = await table('id int primary key, v text, n int')
    await db.query(`insert into ${t} values (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)`)
    const rec = recorder<Array<Change<Row>>>()
    const lc = await db.live.changes(`select * from ${t} order by n`, [], 'id', rec.callback)
    expect(lc.fields).toEqual([
      { name: 'id', dataTypeID: 23 },
      { name: 'v', dataTypeID: 25 },
      { name: 'n', dataTypeID: 23 },
    ])
    expect(lc.initialChanges).toEqual([
      { __op__: 'INSERT', id: 1, v: 'a', n: 1, __after__: null, __changed_columns__: [] },
      { __op__: 'INSERT', id: 2, v: 'b', n: 2, __after__: 1, __changed_columns__: [] },
      { __op__: 'INSERT', id: 3, v: 'c', n: 3, __after__: 2, __changed_columns__: [] },
    ])
    await db.exec(`insert into ${t} values (4, 'd', 0); delete from ${t} where id = 2; update ${t} set v = 'C' where id = 3`)
    expect(await rec.until(2)).toEqual([
      { __op__: 'INSERT', id: 4, v: 'd', n: 0, __after__: null, __changed_columns__: [] },
      { __op__: 'DELETE', id: 2, v: null, n: null, __after__: null, __changed_columns__: [] },
      { __op__: 'UPDATE', id: 1, v: null, n: null, __after__: 4, __changed_columns__: ['__after__'] },
      { __op__: 'UPDATE', id: 3, v: 'C', n: null, __after__: 1, __changed_columns__: ['v', '__after__'] },
    ])
    await lc.unsubscribe()
  })

  it('gives, applied in turn, the results of a re-run after each round of random edits to a 1,000-row table', async () => {
    const t = await table('id int primary key, name text, score int')
    await db.query(`insert into ${t} select i, 'n' || i, (i * 7919) % 1000 from generate_series(1, 1000) i`)
    const sql = `select id, name, score from ${t} where score >= $1 order by score desc, id`
    const follower = new ChangeFollower()
    const rec = recorder<Array<Change<Row>>>()
    const lc = await db.live.changes(sql, [100], 'id', (changes) => {
      follower.apply(changes)
      rec.callback(changes)
    })
    expect(follower.ordered()).toEqual((await db.query(sql, [100])).rows)
    const rnd = random(7)
    let nextId = 1001
    for (let round = 1; round <= 10; round++) {
      await db.transaction(async (tx) => {
        for (let op = 0; op < 40; op++) {
          const id = 1 + Math.floor(rnd() * nextId)
          const kind = rnd()
          if (kind < 0.3) await tx.query(`insert into ${t} values ($1, $2, $3)`, [nextId++, `new${round}`, Math.floor(rnd() * 1000)])
          else if (kind < 0.6) await tx.query(`update ${t} set score = $2 where id = $1`, [id, Math.floor(rnd() * 1000)])
          else if (kind < 0.8) await tx.query(`update ${t} set name = name || '!' where id = $1`, [id])
          else await tx.query(`delete from ${t} where id = $1`, [id])
        }
      })
      await rec.until(round + 1)
      expect(follower.ordered()).toEqual((await db.query(sql, [100])).rows)
    }
    await lc.unsubscribe()
  })

  it('sends an empty list when a refresh finds nothing changed', async () => {
    const t = await table()
    await db.query(`insert into ${t} values (1, 'a')`)
    const rec = recorder<Array<Change<Row>>>()
    const lc = await db.live.changes(`select * from ${t}`, [], 'id', rec.callback)
    await db.query(`update ${t} set v = v`)
    expect(await rec.until(2)).toEqual([])
    await lc.unsubscribe()
  })
})

describe('writes through the socket server', () => {
  let server: PGliteServer | undefined
  let client: PgModule.Client | undefined

  afterAll(async () => {
    await client?.end().catch(() => {})
    await server?.stop()
  })

  it('reach a live query in the same process, one refresh per committed transaction', async () => {
    const t = await table()
    server = new PGliteServer({ db, host: '127.0.0.1', port: 0 })
    const address = await server.start()
    if (!('port' in address)) throw new Error('expected a TCP address')
    client = new pg.Client({ host: '127.0.0.1', port: address.port, user: 'postgres', database: 'postgres' })
    await client.connect()
    const rec = recorder<{ rows: Row[] }>()
    const lq = await db.live.query(`select id from ${t} order by id`, [], rec.callback)
    await client.query(`insert into ${t} values ($1, 'from pg')`, [1])
    expect((await rec.until(2)).rows).toEqual([{ id: 1 }])
    await client.query('begin')
    for (let i = 2; i <= 50; i++) await client.query(`insert into ${t} values ($1, 'tx')`, [i])
    await client.query('commit')
    expect((await rec.until(3)).rows).toHaveLength(50)
    await client.query(`insert into ${t} values (1000, 'sentinel')`)
    await rec.untilMatch((r) => r.rows.length === 51)
    expect(rec.values.map((r) => r.rows.length)).toEqual([0, 1, 50, 51])
    await lq.unsubscribe()
  })
})

describe('lifecycle', () => {
  it('createLive works on a database opened without the extension', async () => {
    const plain = await PGlite.create()
    const lq: LiveHandle = createLive(plain)
    await plain.exec('create table t (id int)')
    const rec = recorder<{ rows: Row[] }>()
    await lq.query('select id from t', [], rec.callback)
    await plain.query('insert into t values (1)')
    expect((await rec.until(2)).rows).toEqual([{ id: 1 }])
    await lq.close()
    const { rows } = await plain.query(`select count(*)::int as n from pg_trigger where not tgisinternal`)
    expect(rows).toEqual([{ n: 0 }])
    await expect(lq.query('select 1')).rejects.toThrow('ended')
    await plain.close()
  })

  it('closing the database ends its live queries and leaves no trigger in its data directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pgwasm-live-'))
    try {
      const first = await PGlite.create(dir, { extensions: { live } })
      await first.exec('create table t (id int)')
      const rec = recorder<{ rows: Row[] }>()
      await first.live.query('select id from t', [], rec.callback)
      await first.live.changes('select id from t', [], 'id')
      await first.query('insert into t values (1)')
      await rec.until(2)
      await first.close()
      const reopened = await PGlite.create(dir)
      const { rows } = await reopened.query(`select count(*)::int as n from pg_trigger where not tgisinternal`)
      expect(rows).toEqual([{ n: 0 }])
      expect(rec.values).toHaveLength(2)
      await reopened.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('reports a callback that throws to onError and still calls the other callbacks', async () => {
    const other = await PGlite.create()
    const errors: unknown[] = []
    const lq = createLive(other, { onError: (err) => errors.push(err) })
    await other.exec('create table t (id int)')
    const handle = await lq.query('select id from t', [], (res) => {
      if (res.rows.length > 0) throw new Error('render failed')
    })
    const rec = recorder<{ rows: Row[] }>()
    handle.subscribe(rec.callback)
    await other.query('insert into t values (1)')
    await rec.until(1)
    expect(errors).toEqual([new Error('render failed')])
    await lq.close()
    await other.close()
  })

  it('a refresh pending when the database closes ends quietly', async () => {
    const other = await PGlite.create()
    const errors: unknown[] = []
    const lq = createLive(other, { onError: (err) => errors.push(err) })
    await other.exec('create table t (id int)')
    await lq.query('select id from t', [], () => {})
    // The notice arrives with this insert; its refresh then meets a closing database.
    const inserted = other.query('insert into t values (1)')
    const closed = other.close()
    await inserted
    await closed
    expect(errors).toEqual([])
    expect(other.closed).toBe(true)
  })
})
