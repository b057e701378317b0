/**
 * A client idle in a READ COMMITTED block that has only read lets the one
 * engine go to the others (session/transaction-parking.ts), as psycopg,
 * JDBC and SQLAlchemy leave one open by default; a block that did anything
 * its early end would change keeps the engine, as before.
 */
import { describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { SYNC, bindFrame, executeFrame, parseFrame, queryFrame } from '@pgwasm/test-support/frontend'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { useServedDatabase, type TestClient } from './helpers.js'

/** Long enough for a query that is not waiting to have answered, on a loaded machine too. */
const WAIT_MS = 400

/** Whether `query` is still waiting after {@link WAIT_MS}. */
async function stillWaiting(query: Promise<unknown>): Promise<boolean> {
  let done = false
  void query.then(
    () => (done = true),
    () => (done = true),
  )
  await new Promise((resolve) => setTimeout(resolve, WAIT_MS))
  return !done
}

describe('a read-only transaction block between statements', () => {
  const served = useServedDatabase({}, (db) =>
    db.exec(`create table parked (id int primary key, note text); insert into parked values (1, 'one');
      create function open_parked_cursor() returns refcursor language plpgsql as $$
        declare c refcursor := 'fn_cursor'; begin open c for select * from parked; return c; end $$;
      create function notify_parked() returns void language plpgsql as $$ begin perform pg_notify('parked', 'from a function'); end $$;
      select lo_create(4242)`),
  )

  async function readingBlock(begin = 'begin'): Promise<TestClient> {
    const reader = await served.connect()
    await reader.query(begin)
    expect((await reader.query('select count(*)::int as n from parked')).rows).toEqual([{ n: 1 }])
    return reader
  }

  it("lets another client's statements run while it stays open, and goes on as the same block after them", async () => {
    const reader = await readingBlock()
    const before = (await reader.query('select now() as at')).rows[0].at as Date
    const other = await served.connect()
    // The reader sends nothing meanwhile: were the engine still its own, this would wait for its block to end.
    await within(other.query("insert into parked values (2, 'two')"), 10_000, "the other client's insert")
    expect((await within(other.query('select 1 as one'), 10_000, "the other client's select")).rows).toEqual([{ one: 1 }])
    // READ COMMITTED: its next statement sees what was committed meanwhile.
    expect((await reader.query('select count(*)::int as n from parked')).rows).toEqual([{ n: 2 }])
    // Still in its block: SET TRANSACTION comes too late, as it would have before.
    await expect(reader.query('set transaction isolation level serializable')).rejects.toMatchObject({ code: '25001' })
    await reader.query('rollback')
    // What a user can see of it: the block's now() moved on.
    await reader.query('begin')
    const first = (await reader.query('select now() as at')).rows[0].at as Date
    await within(other.query('select 1'), 10_000, "the other client's select")
    const second = (await reader.query('select now() as at')).rows[0].at as Date
    expect(second.getTime()).toBeGreaterThan(first.getTime())
    expect(first.getTime()).toBeGreaterThanOrEqual(before.getTime())
    await reader.query('commit')
    await served.db.exec('delete from parked where id <> 1')
  })

  it('lets an in-process caller of the same instance run too, and the block goes on after it', async () => {
    const reader = await readingBlock()
    expect((await within(served.db.query<{ one: number }>('select 1 as one'), 10_000, "the in-process caller's query")).rows).toEqual([{ one: 1 }])
    await within(served.db.exec("insert into parked values (7, 'seven')"), 10_000, "the in-process caller's insert")
    expect((await reader.query('select count(*)::int as n from parked')).rows).toEqual([{ n: 2 }])
    await reader.query('commit')
    await served.db.exec('delete from parked where id <> 1')
  })

  it('keeps what it writes after it was let go atomic: a ROLLBACK undoes it, a COMMIT keeps it', async () => {
    const other = await served.connect()
    for (const end of ['rollback', 'commit']) {
      const reader = await readingBlock()
      await within(other.query('select 1'), 10_000, "the other client's select")
      await reader.query("insert into parked values (3, 'three')")
      await reader.query("update parked set note = 'changed' where id = 1")
      // Now it wrote: the others wait for it again.
      const waiting = other.query('select note from parked where id = 1')
      expect(await stillWaiting(waiting)).toBe(true)
      await reader.query(end)
      const { rows } = (await waiting) as { rows: { note: string }[] }
      expect(rows).toEqual([{ note: end === 'commit' ? 'changed' : 'one' }])
      expect((await other.query('select count(*)::int as n from parked where id = 3')).rows).toEqual([{ n: end === 'commit' ? 1 : 0 }])
      await reader.end()
    }
    await served.db.exec("delete from parked where id <> 1; update parked set note = 'one'")
  })

  it('keeps its access mode when it is begun again: a READ ONLY block still refuses a write (25006)', async () => {
    const reader = await readingBlock('begin read only')
    const other = await served.connect()
    await within(other.query('select 1'), 10_000, "the other client's select")
    await expect(reader.query("insert into parked values (4, 'four')")).rejects.toMatchObject({ code: '25006' })
    await reader.query('rollback')
  })

  it("still lets go of a block after a function with a SET clause ran in it (the clause ends with the call)", async () => {
    await served.db.exec(`create or replace function with_set_clause() returns text language sql set work_mem = '8MB' as $$ select current_setting('work_mem') $$`)
    const reader = await readingBlock()
    expect((await reader.query('select with_set_clause() as wm')).rows).toEqual([{ wm: '8MB' }])
    const other = await served.connect()
    await within(other.query('select 1'), 10_000, "the other client's select")
    expect((await reader.query(`select current_setting('work_mem') as wm`)).rows).toEqual([{ wm: '4MB' }])
    await reader.query('commit')
  })

  it('runs extended-protocol statements of the block, before and after it was let go', async () => {
    const reader = await readingBlock()
    const other = await served.connect()
    const byId = { name: 'by_id', text: 'select note from parked where id = $1', values: [1] }
    expect((await reader.query(byId)).rows).toEqual([{ note: 'one' }])
    await within(other.query({ text: 'select $1::int as n', values: [7] }), 10_000, "the other client's select")
    expect((await reader.query(byId)).rows).toEqual([{ note: 'one' }])
    await reader.query('commit')
  })

  it('is still ended by its idle_in_transaction_session_timeout (25P03) while the others run', async () => {
    const reader = await served.connect()
    const ended = new Promise<Error & { code?: string }>((resolve) => reader.once('error', resolve))
    await reader.query("set idle_in_transaction_session_timeout = '300ms'")
    await reader.query('begin')
    await reader.query('select 1')
    const other = await served.connect()
    await within(other.query('select 1'), 10_000, "the other client's select")
    expect(await within(ended, 10_000, 'the FATAL 25P03')).toMatchObject({ code: '25P03' })
    expect((await other.query('select count(*)::int as n from parked')).rows).toEqual([{ n: 1 }])
  })

  it('leaves no block behind when its client disconnects while it is let go', async () => {
    const reader = await readingBlock()
    const other = await served.connect()
    await within(other.query('select 1'), 10_000, "the other client's select")
    await reader.end()
    await other.query('begin')
    await other.query("insert into parked values (5, 'five')")
    await other.query('commit')
    expect((await other.query('select count(*)::int as n from parked')).rows).toEqual([{ n: 2 }])
    await served.db.exec('delete from parked where id <> 1')
  })

  // Each of these makes the block one whose early end would change something: the others wait for it.
  const keeping: [string, string[]][] = [
    ['a write', ["insert into parked values (6, 'six')"]],
    ['SET LOCAL', ["set local work_mem = '8MB'"]],
    ['a plain SET', ["set work_mem = '8MB'"]],
    ['set_config(..., true) in a SELECT', ["select set_config('work_mem', '8MB', true)"]],
    ['set_config in dynamic SQL', [`do $$ begin perform set_config('work_mem', '8MB', true); end $$`]],
    ['a savepoint', ['savepoint s1']],
    ['a savepoint in a savepoint, one released', ['savepoint s1', 'savepoint s2', 'release savepoint s2']],
    ['a cursor a function left open', ['select open_parked_cursor()']],
    ['a cursor', ['declare c1 cursor for select * from parked']],
    ['a transaction-level advisory lock', ['select pg_advisory_xact_lock(42)']],
    ['pg_notify()', ["select pg_notify('parked', 'hello')"]],
    ['pg_notify() inside a function', ['select notify_parked()']],
    ['pg_notify() Unicode-escaped', [String.raw`select U&"\0070g_notify"('parked', 'escaped')`]],
    ['pg_notify() through EXECUTE format()', [`do $$ begin execute format('select %I(%L, %L)', 'pg_notify', 'parked', 'dynamic'); end $$`]],
    ['SET LOCAL through EXECUTE format()', [`do $$ begin execute format('set local %I = %L', 'work_mem', '8MB'); end $$`]],
    ['LOCK TABLE in a DO block', ['do $$ begin lock table parked in access share mode; end $$']],
    ['a large object opened for reading', ['select lo_open(4242, 262144)']],
    ['LISTEN', ['listen parked_channel']],
    ['an exported snapshot', ['select pg_export_snapshot()']],
    ['LOCK TABLE', ['lock table parked in access share mode']],
  ]
  for (const [what, statements] of keeping) {
    it(`keeps the engine for a block that holds ${what}`, async () => {
      const holder = await readingBlock()
      for (const sql of statements) await holder.query(sql)
      const other = await served.connect()
      const waiting = other.query('select 1 as one')
      expect(await stillWaiting(waiting)).toBe(true)
      await holder.query('rollback')
      expect(((await waiting) as { rows: unknown[] }).rows).toEqual([{ one: 1 }])
      expect((await other.query('select count(*)::int as n from parked')).rows).toEqual([{ n: 1 }])
      await holder.end()
    })
  }

  it('keeps the engine for a block that executed a portal for some rows only, to execute it on after its Sync', async () => {
    const raw = new RawClient(served.port)
    try {
      await raw.handshake()
      raw.write(queryFrame('begin'))
      await raw.until('Z')
      // Two of the rows, then Sync: the unnamed portal stays suspended in the block.
      raw.write(Buffer.concat([parseFrame('select id from parked, generate_series(1, 5)'), bindFrame(), executeFrame('', 2), SYNC]))
      const first = await raw.until('Z')
      expect(first.map((m) => m.type).join('')).toBe('12DDsZ')
      const other = await served.connect()
      const waiting = other.query('select 1 as one')
      expect(await stillWaiting(waiting)).toBe(true)
      // The same portal, on: the rest of its rows.
      raw.write(Buffer.concat([executeFrame('', 0), SYNC]))
      const rest = await raw.until('Z')
      expect(rest.map((m) => m.type).join('')).toBe('DDDCZ')
      raw.write(queryFrame('commit'))
      await raw.until('Z')
      expect(((await waiting) as { rows: unknown[] }).rows).toEqual([{ one: 1 }])
    } finally {
      raw.destroy()
    }
  })

  it('keeps the engine for a REPEATABLE READ block: its snapshot would be lost', async () => {
    const holder = await readingBlock('begin isolation level repeatable read')
    const other = await served.connect()
    const waiting = other.query('select 1 as one')
    expect(await stillWaiting(waiting)).toBe(true)
    await holder.query('commit')
    await waiting
    await holder.end()
  })
})
