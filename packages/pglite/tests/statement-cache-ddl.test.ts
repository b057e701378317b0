import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'

/*
 * The statement cache must never show: after DDL, a cached SQL text gives
 * what a statement prepared afresh gives (what PGlite, which prepares every
 * time, returns), inside and outside transactions, however the DDL ran.
 */

let db: PGlite

beforeEach(async () => {
  db = await PGlite.create()
})

afterEach(async () => {
  await db.close()
})

const SELECT_MOOD = 'select m::text as m from t where m = $1'

/** Drops and re-creates the enum and its table, as an ORM's schema reset between tests does. */
async function recreateMood(labels: string[]): Promise<void> {
  await db.exec(`drop table if exists t; drop type if exists mood;
    create type mood as enum (${labels.map((l) => `'${l}'`).join(', ')});
    create table t (m mood); insert into t values ('${labels[labels.length - 1]}')`)
}

describe('a cached statement after DDL', () => {
  it('reads a re-created enum type (no "cache lookup failed for type")', async () => {
    await recreateMood(['a', 'b'])
    expect((await db.query(SELECT_MOOD, ['b'])).rows).toEqual([{ m: 'b' }])
    await recreateMood(['a', 'b', 'c'])
    expect((await db.query(SELECT_MOOD, ['c'])).rows).toEqual([{ m: 'c' }])
    // And again: the failure used to stick to the SQL text until it left the cache.
    expect((await db.query(SELECT_MOOD, ['c'])).rows).toEqual([{ m: 'c' }])
  })

  it('returns the new type of a column whose type changed', async () => {
    await db.exec('create table c (id int primary key, v int); insert into c values (1, 42)')
    const sql = 'select v from c where id = $1 and v = $2'
    expect((await db.query(sql, [1, 42])).rows).toEqual([{ v: 42 }])
    await db.exec(`alter table c alter column v type text using 'x' || v`)
    expect((await db.query(sql, [1, 'x42'])).rows).toEqual([{ v: 'x42' }])
  })

  it('re-prepares inside a transaction without aborting it', async () => {
    await db.exec('create table r (id int, v int); insert into r values (1, 7)')
    const sql = 'select v from r where id = $1'
    expect((await db.query(sql, [1])).rows).toEqual([{ v: 7 }])
    const rows = await db.transaction(async (tx) => {
      await tx.exec(`alter table r alter column v type text using v::text || '!'`)
      return (await tx.query(sql, [1])).rows
    })
    expect(rows).toEqual([{ v: '7!' }])
  })

  it('sees DDL run by dynamic SQL inside a DO block', async () => {
    await recreateMood(['a', 'b'])
    expect((await db.query(SELECT_MOOD, ['b'])).rows).toEqual([{ m: 'b' }])
    await db.exec(`do $$ begin
      execute 'drop table t'; execute 'drop type mood';
      execute format('create type %I as enum (%L, %L, %L)', 'mood', 'x', 'y', 'z');
      execute 'create table t (m mood)'; execute $q$insert into t values ('z')$q$;
    end $$`)
    expect((await db.query(SELECT_MOOD, ['z'])).rows).toEqual([{ m: 'z' }])
  })

  it('forgets a statement prepared inside a transaction that rolled back its DDL', async () => {
    await db.exec('create table base (v int); insert into base values (1)')
    await db.exec('begin; create type tmp_kind as enum (\'p\'); create table base2 (k tmp_kind)')
    // Cached while the rolled-back objects exist.
    expect((await db.query('select $1::text as k', ['p'])).rows).toEqual([{ k: 'p' }])
    expect((await db.query('select count(*)::int as n from base2 where k = $1', ['p'])).rows).toEqual([{ n: 0 }])
    await db.exec('rollback')
    await db.exec("create type tmp_kind as enum ('p', 'q'); create table base2 (k tmp_kind); insert into base2 values ('q')")
    expect((await db.query('select count(*)::int as n from base2 where k = $1', ['q'])).rows).toEqual([{ n: 1 }])
  })

  it('follows a search_path change made with SET and with set_config()', async () => {
    await db.exec(`create schema s1; create schema s2;
      create table s1.w (v int); insert into s1.w values (1);
      create table s2.w (v text); insert into s2.w values ('two')`)
    const sql = 'select v from w where v = $1'
    await db.exec('set search_path = s1')
    expect((await db.query(sql, [1])).rows).toEqual([{ v: 1 }])
    await db.exec('set search_path = s2')
    expect((await db.query(sql, ['two'])).rows).toEqual([{ v: 'two' }])
    await db.query(`select set_config('search_path', 's1', false)`)
    expect((await db.query(sql, [1])).rows).toEqual([{ v: 1 }])
  })

  it('keeps serving cached statements when no DDL ran (a commit, a SET of another setting)', async () => {
    await db.exec('create table k (id int primary key)')
    const sql = 'select count(*)::int as n from k where id = $1'
    await db.query(sql, [1])
    const prepared = async (): Promise<string[]> =>
      (await db.query<{ name: string }>(`select name from pg_prepared_statements where statement = $1`, [sql])).rows.map((r) => r.name)
    const before = await prepared()
    expect(before).toHaveLength(1)
    await db.transaction(async (tx) => {
      await tx.query(sql, [2])
    })
    await db.exec(`set statement_timeout = '5s'`)
    await db.query(`select set_config('application_name', 'x', false)`)
    await db.query(sql, [3])
    expect(await prepared()).toEqual(before)
  })
})
