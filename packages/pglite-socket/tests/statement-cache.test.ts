import { describe, expect, it } from 'vitest'
import { errorFields, type BackendMessage } from '@pgwasm/test-support/backend'
import { queryFrame, SYNC, bindFrame as bind, describeFrame, executeFrame as execute, parseFrame as parse } from '@pgwasm/test-support/frontend'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { useServedDatabase } from './helpers.js'

/**
 * The server turns a client's repeated Parse of the unnamed statement into a
 * Bind of a statement it prepared once (see src/unnamed-cache.ts). What the
 * client sees must stay what Postgres sends for a fresh Parse every time.
 */

/** What `pg` sends for `client.query(sql, values)`. */
function pgQuery(sql: string, values: (string | null)[]): Buffer {
  return Buffer.concat([parse(sql), bind(values), describeFrame('P'), execute(), SYNC])
}

/** Sends `bytes` and reads up to ReadyForQuery. */
async function roundTrip(raw: RawClient, bytes: Buffer): Promise<BackendMessage[]> {
  raw.write(bytes)
  return raw.until('Z')
}

const types = (messages: BackendMessage[]): string => messages.map((m) => m.type).join('')
const sqlState = (messages: BackendMessage[]): string | undefined => {
  const error = messages.find((m) => m.type === 'E')
  return error ? errorFields(error.body).C : undefined
}
const firstField = (messages: BackendMessage[]): string | undefined => {
  const row = messages.find((m) => m.type === 'D')
  if (!row) return undefined
  const length = row.body.readInt32BE(2)
  return length < 0 ? undefined : row.body.subarray(6, 6 + length).toString()
}

describe('the unnamed-statement cache', () => {
  const served = useServedDatabase({}, (db) =>
    db.exec(`create table sc (id int primary key, label text);
      insert into sc values (1, 'one'), (2, 'two');
      create schema sa; create schema sb;
      create table sa.st (v text); insert into sa.st values ('from a');
      create table sb.st (v int, w int); insert into sb.st values (42, 43)`),
  )

  /** Runs `use` with a raw client that has done its handshake, and closes the client after. */
  async function withRawClient(use: (raw: RawClient) => Promise<void>): Promise<void> {
    const raw = new RawClient(served.port)
    try {
      await raw.handshake()
      await use(raw)
    } finally {
      raw.destroy()
    }
  }

  async function cachedNames(): Promise<string[]> {
    const { rows } = await served.db.query<{ name: string }>(`select name from pg_prepared_statements where name ~ '^c[0-9]+\\.u'`)
    return rows.map((r) => r.name)
  }

  /**
   * Runs `query` until a statement whose name starts with `prefix` is seen
   * cached. The check is an in-process call, after which a cached statement
   * is parsed anew (closed, then prepared again at the next run), so two
   * rounds always suffice.
   */
  async function cachedAfter(query: () => Promise<unknown>, prefix: string): Promise<string[]> {
    for (let round = 0; round < 4; round++) {
      await query()
      const names = (await cachedNames()).filter((n) => n.startsWith(prefix))
      if (names.length > 0) return names
    }
    return []
  }

  /**
   * Runs `run` until its statement is cached for `client`, and once more
   * after the check (an in-process call, which makes the next run parse
   * anew): what follows binds the cached statement, so a test of
   * invalidation tests the cache, not a fresh Parse.
   */
  async function primed(client: { processID: number | null }, run: () => Promise<unknown>): Promise<void> {
    expect(await cachedAfter(run, `c${client.processID}.`)).toHaveLength(1)
    await run()
  }

  it('prepares a repeated unnamed Parse under a name of its own and binds it', async () => {
    const client = await served.connect()
    let i = 0
    const run = async (): Promise<void> => {
      i++
      const { rows } = await client.query<{ n: number }>('select $1::int + 100 as n', [i])
      expect(rows).toEqual([{ n: i + 100 }])
    }
    expect(await cachedAfter(run, `c${client.processID}.`)).toHaveLength(1)
    for (let k = 0; k < 3; k++) await run()
  })

  it('answers a cached Parse with ParseComplete, as a fresh Parse would be', async () => {
    await withRawClient(async (raw) => {
      const first = await roundTrip(raw, pgQuery('select label from sc where id = $1', ['1']))
      const second = await roundTrip(raw, pgQuery('select label from sc where id = $1', ['2']))
      expect(types(first)).toBe('12TDCZ')
      expect(types(second)).toBe('12TDCZ')
      expect(firstField(second)).toBe('two')
    })
  })

  it('returns the new columns of select * after ALTER TABLE adds one', async () => {
    const client = await served.connect()
    const other = await served.connect()
    await client.query('create table sc_alter (id int primary key, a int)')
    await client.query('insert into sc_alter values (1, 10)')
    await primed(client, async () => expect((await client.query('select * from sc_alter where id = $1', [1])).rows).toEqual([{ id: 1, a: 10 }]))
    await other.query(`alter table sc_alter add column b text default 'added'`)
    const { rows } = await client.query('select * from sc_alter where id = $1', [1])
    expect(rows).toEqual([{ id: 1, a: 10, b: 'added' }])
    // And keeps answering from the new shape.
    expect((await client.query('select * from sc_alter where id = $1', [1])).rows).toEqual([{ id: 1, a: 10, b: 'added' }])
  })

  it('follows a table dropped and created again with other column types', async () => {
    const client = await served.connect()
    await client.query('create table sc_again (id int primary key, v int)')
    await client.query('insert into sc_again values (1, 5)')
    await primed(client, async () => expect((await client.query('select v from sc_again where id = $1', [1])).rows).toEqual([{ v: 5 }]))
    await client.query(`drop table sc_again; create table sc_again (id int primary key, v text); insert into sc_again values (1, 'text now')`)
    expect((await client.query('select v from sc_again where id = $1', [1])).rows).toEqual([{ v: 'text now' }])
  })

  it('reports a dropped table as an error of the Parse, with no ParseComplete, as Postgres does', async () => {
    await withRawClient(async (raw) => {
      await roundTrip(raw, queryFrame('create table sc_gone (id int)'))
      for (let i = 0; i < 2; i++) expect(types(await roundTrip(raw, pgQuery('select id from sc_gone where id = $1', ['1'])))).toBe('12TCZ')
      await roundTrip(raw, queryFrame('drop table sc_gone'))
      const after = await roundTrip(raw, pgQuery('select id from sc_gone where id = $1', ['1']))
      expect(types(after)).toBe('EZ')
      expect(sqlState(after)).toBe('42P01')
      expect(after.at(-1)!.body.toString()).toBe('I')
    })
  })

  it('reads the table of the current search_path after SET search_path', async () => {
    const client = await served.connect()
    await client.query('set search_path to sa')
    await primed(client, async () => expect((await client.query('select * from st where $1::int = 1', [1])).rows).toEqual([{ v: 'from a' }]))
    await client.query('set search_path to sb')
    expect((await client.query('select * from st where $1::int = 1', [1])).rows).toEqual([{ v: 42, w: 43 }])
    await client.query('set search_path to sa')
    expect((await client.query('select * from st where $1::int = 1', [1])).rows).toEqual([{ v: 'from a' }])
    await client.query('reset search_path')
  })

  it('reads the table of the current search_path when both tables have the same columns', async () => {
    const client = await served.connect()
    await client.query(`create schema sx; create schema sy; create table sx.same (v text); create table sy.same (v text);
      insert into sx.same values ('x'); insert into sy.same values ('y')`)
    await client.query('set search_path to sx')
    await primed(client, async () => expect((await client.query('select v from same where $1::int = 1', [1])).rows).toEqual([{ v: 'x' }]))
    await client.query('set search_path to sy')
    expect((await client.query('select v from same where $1::int = 1', [1])).rows).toEqual([{ v: 'y' }])
    await client.query('reset search_path')
  })

  it('finds a temporary table created since, that hides the table the query read before', async () => {
    const client = await served.connect()
    await client.query(`create table sh_t (v text); insert into sh_t values ('public')`)
    await primed(client, async () => expect((await client.query('select v from sh_t where $1::int = 1', [1])).rows).toEqual([{ v: 'public' }]))
    await client.query(`create temp table sh_t (v text); insert into pg_temp.sh_t values ('temp')`)
    expect((await client.query('select v from sh_t where $1::int = 1', [1])).rows).toEqual([{ v: 'temp' }])
    await client.query('drop table pg_temp.sh_t')
    expect((await client.query('select v from sh_t where $1::int = 1', [1])).rows).toEqual([{ v: 'public' }])
  })

  it('calls a better-matching function made since by dynamic SQL in a function', async () => {
    const client = await served.connect()
    // Postgres's plan cache does not look for new overloads: only a new Parse finds one.
    await client.query(`create function sh_f(numeric) returns text language sql as $$ select 'numeric' $$`)
    await client.query(`create function sh_make() returns void language plpgsql as $$ begin
      execute format('create function sh_f(int) returns text language sql as %L', 'select ''int'''); end $$`)
    await client.query(`create function sh_drop() returns void language plpgsql as $$ begin execute 'drop function sh_f(int)'; end $$`)
    const call = async (): Promise<string> => (await client.query<{ v: string }>('select sh_f($1::int) as v', [1])).rows[0]!.v
    await primed(client, call)
    // Parsed again after primed()'s in-process check, then bound from the cache.
    expect(await call()).toBe('numeric')
    expect(await call()).toBe('numeric')
    // A SELECT, in the SQL text the server reads: only the engine sees the DDL.
    await client.query('select sh_make()')
    expect(await call()).toBe('int')
    await client.query('select sh_drop()')
    expect(await call()).toBe('numeric')
  })

  it('finds a table made by CREATE TABLE AS earlier in the search_path, whose tag reads SELECT', async () => {
    const client = await served.connect()
    await client.query(`create schema sh_s; create table sh_ctas (v text); insert into sh_ctas values ('public')`)
    await client.query('set search_path to sh_s, public')
    await primed(client, async () => expect((await client.query('select v from sh_ctas where $1::int = 1', [1])).rows).toEqual([{ v: 'public' }]))
    await client.query(`create table sh_s.sh_ctas as select 'sh_s'::text as v`)
    expect((await client.query('select v from sh_ctas where $1::int = 1', [1])).rows).toEqual([{ v: 'sh_s' }])
    await client.query('reset search_path')
  })

  it('reads literals with the TimeZone set since, by SET or by set_config()', async () => {
    const client = await served.connect()
    const sql = `select '2024-01-01 00:00'::timestamptz::text as v where $1::int = 1`
    await client.query(`set timezone = 'UTC'`)
    await primed(client, async () => expect((await client.query(sql, [1])).rows).toEqual([{ v: '2024-01-01 00:00:00+00' }]))
    await client.query(`set timezone = 'Asia/Tokyo'`)
    expect((await client.query(sql, [1])).rows).toEqual([{ v: '2024-01-01 00:00:00+09' }])
    await client.query(sql, [1])
    await client.query(`select set_config('TimeZone', 'UTC', false)`)
    expect((await client.query(sql, [1])).rows).toEqual([{ v: '2024-01-01 00:00:00+00' }])
  })

  it('parses again after a SET of a setting that changes how SQL is read', async () => {
    const client = await served.connect()
    const sql = 'select ($1::int = null) as v'
    await primed(client, async () => expect((await client.query(sql, [1])).rows).toEqual([{ v: null }]))
    await client.query('set transform_null_equals = on')
    expect((await client.query(sql, [1])).rows).toEqual([{ v: false }])
    await client.query('reset transform_null_equals')
    expect((await client.query(sql, [1])).rows).toEqual([{ v: null }])
  })

  it('parses again after an in-process caller used the database', async () => {
    const client = await served.connect()
    await client.query(`create table sh_in (v text); insert into sh_in values ('public')`)
    await primed(client, async () => expect((await client.query('select v from sh_in where $1::int = 1', [1])).rows).toEqual([{ v: 'public' }]))
    await served.db.exec(`create temp table sh_in (v text); insert into pg_temp.sh_in values ('temp')`)
    expect((await client.query('select v from sh_in where $1::int = 1', [1])).rows).toEqual([{ v: 'temp' }])
    await served.db.exec('drop table pg_temp.sh_in')
  })

  it("runs the query as sent after an in-process caller's DISCARD ALL removed the cached statement", async () => {
    const client = await served.connect()
    await primed(client, async () => expect((await client.query('select label from sc where id = $1', [2])).rows).toEqual([{ label: 'two' }]))
    // A client's DISCARD ALL leaves the others' statements (own-scope.test.ts); an in-process caller's is the session's own.
    await served.db.exec('discard all')
    expect(await cachedNames()).toEqual([])
    expect((await client.query('select label from sc where id = $1', [1])).rows).toEqual([{ label: 'one' }])
    // Cached again from there on.
    const again = async (): Promise<void> => {
      expect((await client.query('select label from sc where id = $1', [2])).rows).toEqual([{ label: 'two' }])
    }
    expect(await cachedAfter(again, `c${client.processID}.`)).toHaveLength(1)
  })

  it('runs the query as sent after DEALLOCATE ALL, with the exact messages of a fresh Parse', async () => {
    await withRawClient(async (raw) => {
      for (let i = 0; i < 2; i++) await roundTrip(raw, pgQuery('select label from sc where id = $1', ['1']))
      expect(types(await roundTrip(raw, queryFrame('deallocate all')))).toBe('CZ')
      const after = await roundTrip(raw, pgQuery('select label from sc where id = $1', ['2']))
      expect(types(after)).toBe('12TDCZ')
      expect(firstField(after)).toBe('two')
    })
  })

  it('runs DEALLOCATE ALL sent through the extended protocol as sent, each time', async () => {
    await withRawClient(async (raw) => {
      const sql = 'select label from sc where id = $1'
      for (let i = 0; i < 2; i++) await roundTrip(raw, pgQuery(sql, ['1']))
      for (let i = 0; i < 2; i++) expect(types(await roundTrip(raw, pgQuery('deallocate all', [])))).toBe('12nCZ')
      const after = await roundTrip(raw, pgQuery(sql, ['2']))
      expect(types(after)).toBe('12TDCZ')
      expect(firstField(after)).toBe('two')
    })
  })

  it('sends the warnings of a Parse every time: SQL whose Parse warns is never cached', async () => {
    await withRawClient(async (raw) => {
      await roundTrip(raw, queryFrame('set standard_conforming_strings = off'))
      for (let i = 0; i < 3; i++) {
        const reply = await roundTrip(raw, pgQuery(`select 'a\\\\b' as v where $1::int = 1`, ['1']))
        expect(types(reply)).toBe('N12TDCZ')
        expect(firstField(reply)).toBe('a\\b')
      }
      await roundTrip(raw, queryFrame('reset standard_conforming_strings'))
    })
  })

  it('describes and binds the unnamed statement in later batches as the SQL last parsed', async () => {
    await withRawClient(async (raw) => {
      const sql = 'select label, id from sc where id = $1'
      for (let i = 0; i < 2; i++) expect(types(await roundTrip(raw, pgQuery(sql, ['1'])))).toBe('12TDCZ')
      // Describe of the unnamed statement, on its own.
      const described = await roundTrip(raw, Buffer.concat([describeFrame('S'), SYNC]))
      expect(types(described)).toBe('tTZ')
      expect(described[1]!.body.toString('latin1')).toContain('label')
      // Bind of the unnamed statement with no Parse before it.
      const bound = await roundTrip(raw, Buffer.concat([bind(['2']), execute(), SYNC]))
      expect(types(bound)).toBe('2DCZ')
      expect(firstField(bound)).toBe('two')
      // A sequence that describes the statement itself.
      const withDescribe = await roundTrip(raw, Buffer.concat([parse(sql), describeFrame('S'), bind(['1']), execute(), SYNC]))
      expect(types(withDescribe)).toBe('1tT2DCZ')
      expect(firstField(withDescribe)).toBe('one')
    })
  })

  it('sends the Parse error every time and caches nothing for SQL that does not parse', async () => {
    await withRawClient(async (raw) => {
      const before = await cachedNames()
      for (let i = 0; i < 3; i++) {
        const reply = await roundTrip(raw, pgQuery('selec label from sc where id = $1', ['1']))
        expect(types(reply)).toBe('EZ')
        expect(sqlState(reply)).toBe('42601')
      }
      expect(await cachedNames()).toEqual(before)
    })
  })

  it('caches a query that failed to parse once its table exists', async () => {
    await withRawClient(async (raw) => {
      const sql = 'select n from sc_later where n = $1'
      expect(sqlState(await roundTrip(raw, pgQuery(sql, ['1'])))).toBe('42P01')
      await roundTrip(raw, queryFrame('create table sc_later (n int); insert into sc_later values (1)'))
      for (let i = 0; i < 3; i++) {
        const reply = await roundTrip(raw, pgQuery(sql, ['1']))
        expect(types(reply)).toBe('12TDCZ')
        expect(firstField(reply)).toBe('1')
      }
    })
  })

  it('reports a bad parameter after a cached Parse as Postgres does: ParseComplete, then the error', async () => {
    await withRawClient(async (raw) => {
      const sql = 'select label from sc where id = $1'
      for (let i = 0; i < 2; i++) await roundTrip(raw, pgQuery(sql, ['1']))
      const reply = await roundTrip(raw, pgQuery(sql, ['not a number']))
      expect(types(reply)).toBe('1EZ')
      expect(sqlState(reply)).toBe('22P02')
      expect(firstField(await roundTrip(raw, pgQuery(sql, ['2'])))).toBe('two')
    })
  })

  it('parses every time inside a transaction block, where a refused cached plan would abort it', async () => {
    const client = await served.connect()
    await client.query('create table sc_tx (id int primary key, a int)')
    await client.query('insert into sc_tx values (1, 1)')
    for (let i = 0; i < 3; i++) await client.query('select * from sc_tx where id = $1', [1])
    await client.query('begin')
    await client.query('alter table sc_tx add column b int default 7')
    expect((await client.query('select * from sc_tx where id = $1', [1])).rows).toEqual([{ id: 1, a: 1, b: 7 }])
    await client.query('commit')
  })

  it('answers a query in a failed transaction with the error alone, as a fresh Parse is refused', async () => {
    await withRawClient(async (raw) => {
      const sql = 'select label from sc where id = $1'
      for (let i = 0; i < 2; i++) await roundTrip(raw, pgQuery(sql, ['1']))
      await roundTrip(raw, queryFrame('begin'))
      await roundTrip(raw, queryFrame('select 1/0'))
      const reply = await roundTrip(raw, pgQuery(sql, ['1']))
      expect(types(reply)).toBe('EZ')
      expect(sqlState(reply)).toBe('25P02')
      expect(reply.at(-1)!.body.toString()).toBe('E')
      await roundTrip(raw, queryFrame('rollback'))
    })
  })

  it('gives two clients running the same SQL each their own statement', async () => {
    const a = await served.connect()
    const b = await served.connect()
    const runA = async (): Promise<void> => {
      expect((await a.query('select label from sc where id = $1', [1])).rows).toEqual([{ label: 'one' }])
    }
    const runB = async (): Promise<void> => {
      expect((await b.query('select label from sc where id = $1', [2])).rows).toEqual([{ label: 'two' }])
    }
    expect(await cachedAfter(runA, `c${a.processID}.`)).toHaveLength(1)
    expect(await cachedAfter(runB, `c${b.processID}.`)).toHaveLength(1)
    for (let i = 0; i < 3; i++) {
      await runA()
      await runB()
    }
  })

  it('closes the cached statements of a client that disconnects', async () => {
    const raw = new RawClient(served.port)
    const keyData = (await raw.handshake()).find((m) => m.type === 'K')!
    const prefix = `c${keyData.body.readInt32BE(0)}.`
    const mine = await cachedAfter(() => roundTrip(raw, pgQuery('select label from sc where id = $1 and $1 > 0', ['1'])), prefix)
    expect(mine).toHaveLength(1)
    raw.destroy()
    await raw.closed
    // The cleanup runs on the engine's queue: a query queued after it sees its result.
    for (;;) {
      const { rows } = await served.db.query(`select 1 from pg_prepared_statements where name = $1`, [mine[0]!])
      if (rows.length === 0) break
      await new Promise((resolve) => setImmediate(resolve))
    }
  })
})
