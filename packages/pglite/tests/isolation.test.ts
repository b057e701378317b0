import { describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'

const userTables = `select relname from pg_class where oid >= 16384 and relkind = 'r' order by relname`

describe('in-memory databases are independent', () => {
  it('never shows a write of one database in a database created after it, whether it was checkpointed or closed', async () => {
    const first = await PGlite.create()
    for (const how of ['left open', 'checkpointed', 'closed']) {
      const writer = await PGlite.create()
      await writer.exec(`create table written_${how.replace(' ', '_')} (a int); insert into written_${how.replace(' ', '_')} values (1)`)
      if (how === 'checkpointed') await writer.exec('checkpoint')
      if (how === 'closed') await writer.close()
      const next = await PGlite.create()
      expect((await next.query(userTables)).rows, how).toEqual([])
      // The same DDL must succeed: catalogs and OIDs are the new database's own.
      await next.exec('create table written_left_open (a int)')
      await next.close()
      if (how !== 'closed') await writer.close()
    }
    expect((await first.query(userTables)).rows).toEqual([])
    await first.close()
  })

  it('keeps a clone and its source apart in both directions', async () => {
    const source = await PGlite.create()
    await source.exec('create table s (a int); insert into s values (1)')
    const copy = await source.clone()
    await source.exec('insert into s values (2)')
    await copy.exec('insert into s values (3); create table only_in_copy (a int)')
    expect((await source.query('select a from s order by a')).rows).toEqual([{ a: 1 }, { a: 2 }])
    expect((await copy.query('select a from s order by a')).rows).toEqual([{ a: 1 }, { a: 3 }])
    expect((await source.query(`select count(*)::int as n from pg_class where relname = 'only_in_copy'`)).rows).toEqual([{ n: 0 }])
    await copy.close()
    await source.close()
  })
})

describe('a closed in-memory database hands its module to the next one', () => {
  it('leaves nothing behind: tables, temp files, cursors, prepared statements, settings, listeners, sequences', async () => {
    for (let round = 0; round < 12; round++) {
      const db = await PGlite.create()
      const seen = await db.query<{ tables: number; prepared: number; setting: string; nextval: string }>(
        `select (select count(*)::int from pg_class where relname in ('leftover', 'leftover_tmp', 'leftover_seq')) as tables,
                (select count(*)::int from pg_prepared_statements where name = 'leftover_stmt') as prepared,
                current_setting('work_mem') as setting,
                (select count(*)::text from pg_listening_channels()) as nextval`,
      )
      expect(seen.rows[0], `round ${round}`).toEqual({ tables: 0, prepared: 0, setting: '4MB', nextval: '0' })
      expect(db.isInTransaction()).toBe(false)
      await db.exec(`
        create table leftover (id int primary key, v text);
        insert into leftover select g, md5(g::text) from generate_series(1, 2000) g;
        create temp table leftover_tmp as select * from leftover;
        create sequence leftover_seq;
        select nextval('leftover_seq');
        prepare leftover_stmt as select 1;
        set work_mem = '64kB';
        listen leftover_channel;
      `)
      // A sort larger than work_mem spills to temporary files in PGDATA.
      const sorted = await db.query<{ v: string }>('select v from leftover order by v desc limit 1')
      expect(sorted.rows).toHaveLength(1)
      // Closed in the middle of a transaction with an open cursor.
      await db.exec(`begin; declare c cursor for select * from leftover; fetch 10 from c;`)
      await db.close()
    }
  })

  it('keeps a recycled module apart from a live clone source', async () => {
    const source = await PGlite.create()
    await source.exec('create table src (v int); insert into src values (1)')
    for (let round = 0; round < 4; round++) {
      const copy = await source.clone()
      await copy.exec('insert into src values (2)')
      expect((await copy.query<{ n: number }>('select count(*)::int as n from src')).rows[0]!.n).toBe(2)
      await copy.close()
    }
    expect((await source.query<{ n: number }>('select count(*)::int as n from src')).rows[0]!.n).toBe(1)
    await source.close()
  })
})

describe('clone() of an unchanged source reuses its snapshot', () => {
  it('sees every write made to the source before it, and none after', async () => {
    const source = await PGlite.create()
    await source.exec('create table seq (v int)')
    const copies: PGlite[] = []
    for (let v = 1; v <= 4; v++) {
      // Two clones in a row with no request between: the second reuses the snapshot.
      copies.push(await source.clone(), await source.clone())
      await source.query('insert into seq values ($1)', [v])
    }
    for (const [i, copy] of copies.entries()) {
      const { rows } = await copy.query<{ n: number }>('select count(*)::int as n from seq')
      expect(rows[0]!.n, `copy ${i}`).toBe(Math.floor(i / 2))
      await copy.close()
    }
    await source.close()
  })

  it("parses arrays of the types the source had at each clone: a later clone of an unchanged source too, and a clone after a new type", async () => {
    const source = await PGlite.create()
    await source.exec("create type mood as enum ('sad', 'ok', 'happy')")
    // The source's own parsers were made before the type; each copy reads its catalog.
    const moods = async (db: PGlite): Promise<unknown> => (await db.query<{ m: unknown }>(`select array['ok', 'happy']::mood[] as m`)).rows[0]!.m
    const first = await source.clone()
    const second = await source.clone()
    expect(await moods(first)).toEqual(['ok', 'happy'])
    expect(await moods(second)).toEqual(['ok', 'happy'])
    await source.exec("create type size as enum ('s', 'm')")
    const third = await source.clone()
    expect((await third.query<{ s: unknown }>(`select array['m']::size[] as s`)).rows[0]!.s).toEqual(['m'])
    // A copy made before the new type does not know it, as its catalog does not.
    await expect(second.query(`select array['m']::size[] as s`)).rejects.toMatchObject({ code: '42704' })
    for (const db of [first, second, third, source]) await db.close()
  })
})

describe('module sizes', () => {
  it('clones a source whose memory is below the engine minimum, and a source that grew past the pooled size', async () => {
    // 16 MB of shared buffers leaves the program break below the 128 MB a
    // module starts with; a sort of ~90 MB in work_mem grows the heap.
    const small = await PGlite.create({ postgresqlConf: { shared_buffers: '16MB' } })
    await small.exec(`create table t (id int primary key, a text); insert into t select g, md5(g::text) from generate_series(1, 2000) g`)
    const smallCopy = await small.clone()
    expect((await smallCopy.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n).toBe(2000)

    const grown = await PGlite.create({ postgresqlConf: { work_mem: '256MB' } })
    await grown.exec(`create table t as select g as id, repeat(md5(g::text), 8) as a from generate_series(1, 300000) g`)
    await grown.query('select a from t order by a desc offset 299999')
    // Past the 128 MB of a pooled module (a snapshot's ~56 MB plus 32 MB of headroom is less).
    expect(grown._internalStats().wasmMemoryBytes).toBeGreaterThan(144 * 1024 * 1024)
    const grownCopy = await grown.clone()
    const again = await grown.clone()
    for (const copy of [grownCopy, again]) {
      expect((await copy.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n).toBe(300000)
      await copy.exec('insert into t values (0, $$x$$)')
      await copy.close()
    }
    expect((await grown.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n).toBe(300000)
    await Promise.all([smallCopy.close(), small.close(), grown.close()])
  }, 120_000)
})
