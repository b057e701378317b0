import { describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { endQuietly, useServedDatabase } from './helpers.js'

/*
 * Temporary relations, WITH HOLD cursors and SQL-level PREPAREd statements
 * live in the engine's one session; a client's go when it disconnects, as a
 * PostgreSQL backend's go with it (the "temp tables outlive the
 * client that made them": a later client got `relation "foo" already exists`).
 */
describe("a client's temporary relations, held cursors and SQL-prepared statements", () => {
  const served = useServedDatabase()

  /** Polls `check` until it is true (the server drops a departed client's objects after its socket closes). */
  async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
    await within(
      (async () => {
        while (!(await check())) await new Promise((r) => setTimeout(r, 20))
      })(),
      5000,
      what,
    )
  }

  const count = async (sql: string): Promise<number> => {
    const { rows } = await served.db.query<{ n: number }>(sql)
    return rows[0]!.n
  }

  it('are dropped when the client that made them disconnects; another client can then make the same names', async () => {
    const a = await served.connect()
    await a.query('create temp table scratch (id int primary key, v text)')
    await a.query("insert into scratch values (1, 'a')")
    await a.query('select 1 as n into temp table picked')
    await a.query('create temporary view scratch_view as select * from scratch')
    await a.query('create temp sequence scratch_seq')
    await a.query('begin')
    await a.query('declare held cursor with hold for select generate_series(1, 3) as g')
    await a.query('commit')
    await a.query('prepare by_id (int) as select v from scratch where id = $1')
    // Through the extended protocol too.
    await a.query({ name: 'make-ext', text: 'create temp table ext_made (a int)' })
    expect((await a.query('execute by_id(1)')).rows).toEqual([{ v: 'a' }])
    expect((await a.query('fetch 2 from held')).rows).toEqual([{ g: 1 }, { g: 2 }])

    const b = await served.connect()
    await b.query('create temp table b_own (x int)')
    const temps = "select count(*)::int as n from pg_class where relnamespace = pg_my_temp_schema() and relkind in ('r', 'v', 'S')"
    expect(await count(temps)).toBe(6)

    await endQuietly(a)
    await eventually(async () => (await count(temps)) === 1, "a's temporary relations are dropped")
    expect(await count('select count(*)::int as n from pg_cursors where is_holdable')).toBe(0)
    expect(await count('select count(*)::int as n from pg_prepared_statements where from_sql')).toBe(0)
    // The names are free again, and b's own table is still there.
    const c = await served.connect()
    await c.query('create temp table scratch (id int)')
    await c.query('prepare by_id as select 1')
    await c.query('declare held cursor with hold for select 1')
    await b.query('insert into b_own values (1)')
    expect((await b.query('select count(*)::int as n from b_own')).rows).toEqual([{ n: 1 }])
    await endQuietly(c)
    await endQuietly(b)
    await eventually(async () => (await count(temps)) === 0, "b's and c's temporary relations are dropped")
  })

  it('leaves what in-process callers of the instance made, and what the client made and dropped itself', async () => {
    await served.db.exec('create temp table in_process (a int); insert into in_process values (1)')
    const a = await served.connect()
    await a.query('create temp table gone_already (a int)')
    await a.query('drop table gone_already')
    await a.query('create temp table kept_by_nobody (a int)')
    await endQuietly(a)
    await eventually(
      async () => (await count("select count(*)::int as n from pg_class where relname = 'kept_by_nobody' and relnamespace = pg_my_temp_schema()")) === 0,
      "a's table is dropped",
    )
    expect((await served.db.query('select count(*)::int as n from in_process')).rows).toEqual([{ n: 1 }])
    await served.db.exec('drop table in_process')
  })

  it('drops a table the client made in a transaction that it left open', async () => {
    const a = await served.connect()
    await a.query('begin')
    await a.query('create temp table in_tx (a int)')
    await a.query('insert into in_tx values (1)')
    const b = await served.connect()
    // b waits for a's transaction; a disconnects mid-transaction: its work rolls back.
    const bRead = b.query("select count(*)::int as n from pg_class where relname = 'in_tx'")
    await endQuietly(a)
    expect((await bRead).rows).toEqual([{ n: 0 }])
    await endQuietly(b)
  })

  it("are each client's own while it is connected: two clients keep a temp table, view, sequence and index of the same names apart", async () => {
    const a = await served.connect()
    const b = await served.connect()
    const make = async (c: typeof a, who: string): Promise<void> => {
      await c.query('create temp table foo (id serial primary key, who text)')
      await c.query('create index foo_who on foo (who)')
      await c.query('create temp view foo_view as select who from foo')
      await c.query('create temp sequence foo_seq start 100')
      await c.query('insert into foo (who) values ($1), ($1)', [who])
    }
    await make(a, 'a')
    // b does not see a's table while a is connected, as no PostgreSQL backend sees another's.
    await expect(b.query('select * from foo')).rejects.toMatchObject({ code: '42P01' })
    await make(b, 'b')
    for (let round = 0; round < 3; round++) {
      expect((await a.query('select who, count(*)::int as n from foo_view group by who')).rows).toEqual([{ who: 'a', n: 2 + round }])
      expect((await b.query('select who, count(*)::int as n from foo_view group by who')).rows).toEqual([{ who: 'b', n: 2 + round }])
      await Promise.all([a.query("insert into foo (who) values ('a')"), b.query("insert into foo (who) values ('b')")])
    }
    expect((await a.query("select nextval('foo_seq')::int as v")).rows).toEqual([{ v: 100 }])
    expect((await b.query("select nextval('foo_seq')::int as v")).rows).toEqual([{ v: 100 }])
    // Inside a transaction block too, and a prepared statement of each keeps reading its own table.
    await a.query('begin')
    expect((await a.query({ name: 'mine', text: 'select count(*)::int as n from foo where who = $1', values: ['a'] })).rows).toEqual([{ n: 5 }])
    await a.query('commit')
    expect((await b.query({ name: 'mine', text: 'select count(*)::int as n from foo where who = $1', values: ['b'] })).rows).toEqual([{ n: 5 }])
    expect((await a.query({ name: 'mine', values: ['a'] })).rows).toEqual([{ n: 5 }])
    await endQuietly(a)
    // a's go with it; b's stay, by their names.
    expect((await b.query("select count(*)::int as n from foo where who = 'b'")).rows).toEqual([{ n: 5 }])
    await eventually(async () => (await count("select count(*)::int as n from pg_class where relnamespace = pg_my_temp_schema() and relkind = 'r'")) === 1, "a's table is dropped")
    await endQuietly(b)
  })
})
