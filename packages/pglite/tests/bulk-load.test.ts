import { describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'

// In-memory files grow and shrink through MEMFS' resize (ftruncate and
// fallocate, which Postgres uses to extend a relation many blocks at once).
// Its speed is in `pnpm bench`; here, that what it leaves is right.
describe('bulk loads into an in-memory database', () => {
  it('CREATE TABLE AS and COPY FROM keep every row', async () => {
    const db = await PGlite.create()
    await db.exec(`create table a as select g as id, repeat(md5(g::text), 16) as v from generate_series(1, 20000) g`)
    const copy = new Blob([Array.from({ length: 20000 }, (_, i) => `${i + 1}\t${'x'.repeat(500)}\n`).join('')])
    await db.exec(`create table b (id int, v text)`)
    await db.query(`copy b from '/dev/blob'`, [], { blob: copy })
    const { rows } = await db.query<{ a: number; b: number; s: string; want: string }>(`
      select (select count(*)::int from a) as a, (select count(*)::int from b) as b,
             (select md5(string_agg(v, '' order by id)) from a) as s,
             (select md5(string_agg(repeat(md5(g::text), 16), '' order by g)) from generate_series(1, 20000) g) as want`)
    expect(rows[0]!.a).toBe(20000)
    expect(rows[0]!.b).toBe(20000)
    expect(rows[0]!.s).toBe(rows[0]!.want)
    await db.close()
  })

  it('a relation truncated by VACUUM and extended again reads as new pages (zeros past the old end)', async () => {
    const db = await PGlite.create()
    await db.exec(`create table t (id int, v text); insert into t select g, repeat('y', 400) from generate_series(1, 20000) g`)
    const size = async (): Promise<number> => (await db.query<{ n: number }>(`select pg_relation_size('t')::int as n`)).rows[0]!.n
    const full = await size()
    await db.exec(`delete from t where id > 10000`)
    await db.exec(`vacuum t`)
    // Cut to about half: the array keeps its room, and the old pages stay in it past the end.
    expect(await size()).toBeLessThan(full * 0.6)
    // Extending over the cut-off part must not find the old pages' bytes: their rows would come back.
    await db.exec(`insert into t select g, repeat('z', 400) from generate_series(10001, 30000) g`)
    await db.exec(`checkpoint`)
    expect(await size()).toBeGreaterThan(full)
    const { rows } = await db.query<{ n: number; z: number }>(`select count(*)::int as n, count(*) filter (where v like 'z%')::int as z from t`)
    expect(rows[0]).toEqual({ n: 30000, z: 20000 })
    await db.exec(`truncate t; insert into t values (1, 'again')`)
    expect((await db.query<{ v: string }>('select v from t')).rows).toEqual([{ v: 'again' }])
    const clone = await db.clone()
    expect((await clone.query<{ v: string }>('select v from t')).rows).toEqual([{ v: 'again' }])
    await clone.close()
    await db.close()
  })

  it('a relation past 32 MB (grown in place) keeps its rows through a shrink, a regrowth and a clone', async () => {
    const db = await PGlite.create()
    const sum = async (on: PGlite): Promise<{ n: number; s: string }> =>
      (await on.query<{ n: number; s: string }>(`select count(*)::int as n, md5(string_agg(v, '' order by id)) as s from t`)).rows[0]!
    await db.exec(`create table t (id int, v text); insert into t select g, repeat(chr(65 + g % 26), 1000) from generate_series(1, 50000) g`)
    expect((await db.query<{ n: number }>(`select pg_relation_size('t')::int as n`)).rows[0]!.n).toBeGreaterThan(48 * 1024 * 1024)
    await db.exec('checkpoint')
    const before = await sum(db)
    const clone = await db.clone()
    // The clone shares the source's file: neither side's writes may reach the other.
    await db.exec(`delete from t where id > 20000`)
    await db.exec(`vacuum t`)
    expect((await db.query<{ n: number }>(`select pg_relation_size('t')::int as n`)).rows[0]!.n).toBeLessThan(24 * 1024 * 1024)
    await db.exec(`insert into t select g, repeat('z', 1000) from generate_series(20001, 60000) g`)
    await db.exec('checkpoint')
    await clone.exec(`insert into t select g, repeat('q', 1000) from generate_series(50001, 70000) g; checkpoint`)
    expect(await sum(clone)).toEqual((await clone.query<{ n: number; s: string }>(`
      select 70000 as n, md5(string_agg(case when g <= 50000 then repeat(chr(65 + g % 26), 1000) else repeat('q', 1000) end, '' order by g)) as s
      from generate_series(1, 70000) g`)).rows[0])
    expect(await sum(db)).toEqual((await db.query<{ n: number; s: string }>(`
      select 60000 as n, md5(string_agg(case when g <= 20000 then repeat(chr(65 + g % 26), 1000) else repeat('z', 1000) end, '' order by g)) as s
      from generate_series(1, 60000) g`)).rows[0])
    expect(before.n).toBe(50000)
    await clone.close()
    await db.close()
  })
})
