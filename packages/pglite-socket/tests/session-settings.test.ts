import { describe, expect, it } from 'vitest'
import { useServedDatabase } from './helpers.js'

// Each client's settings are its own on the one shared session, as each
// PostgreSQL connection's are (a transaction pooler's restore on switch).
describe('per-client session settings', () => {
  const served = useServedDatabase({}, (db) => db.exec(`create schema other; create table other.t (v text); insert into other.t values ('other')`))

  it('a SET of one client is not seen by another, and is still there when it comes back', async () => {
    const a = await served.connect()
    const b = await served.connect()
    const show = async (c: typeof a, name: string): Promise<string> =>
      ((await c.query(`select current_setting('${name}') as v`)).rows[0] as { v: string }).v
    await a.query(`set search_path = other, public`)
    await a.query(`set timezone = 'Asia/Tokyo'`)
    await a.query(`set work_mem = '7MB'`)
    for (let round = 0; round < 3; round++) {
      expect(await show(b, 'TimeZone')).toBe('UTC')
      expect(await show(b, 'work_mem')).toBe('4MB')
      expect(await show(a, 'TimeZone')).toBe('Asia/Tokyo')
      expect(await show(a, 'work_mem')).toBe('7MB')
      expect((await a.query('select v from t')).rows).toEqual([{ v: 'other' }])
      await expect(b.query('select v from t')).rejects.toMatchObject({ code: '42P01' })
    }
    await a.query('reset timezone')
    expect(await show(a, 'TimeZone')).toBe('UTC')
    await b.query(`set timezone = 'Europe/Paris'`)
    expect(await show(a, 'TimeZone')).toBe('UTC')
    expect(await show(b, 'TimeZone')).toBe('Europe/Paris')
  })

  it('restores a value written to end the quoting of the restore statement as the value itself, running none of it', async () => {
    const a = await served.connect()
    const b = await served.connect()
    const app = `x $pgwasm$; create table injected_app (v int); -- $v$ $$`
    const path = `"y $pgwasm$ END $pgwasm$; create table injected_path (v int); --"`
    await a.query(`set application_name = '${app}'`)
    await a.query(`set search_path = '${path.replaceAll("'", "''")}'`)
    const read = `select current_setting('application_name') as app, current_setting('search_path') as sp`
    const own = (await a.query(read)).rows[0] as { app: string; sp: string }
    expect(own.app).toBe(app)
    expect(own.sp).toContain('create table injected_path')
    for (let round = 0; round < 2; round++) {
      await b.query('select 1')
      expect((await a.query(read)).rows).toEqual([own])
    }
    const made = await b.query(`select count(*)::int as n from pg_catalog.pg_class where relname like 'injected%'`)
    expect(made.rows).toEqual([{ n: 0 }])
  })

  it('restores them also after the engine went back to the instance in between (an idle pause)', async () => {
    const a = await served.connect()
    const b = await served.connect()
    await a.query(`set timezone = 'Asia/Tokyo'`)
    await new Promise((r) => setTimeout(r, 30))
    expect((await b.query(`select current_setting('TimeZone') as v`)).rows).toEqual([{ v: 'UTC' }])
    await new Promise((r) => setTimeout(r, 30))
    expect((await a.query(`select current_setting('TimeZone') as v`)).rows).toEqual([{ v: 'Asia/Tokyo' }])
  })

  it('takes application_name and options -c settings from the startup packet', async () => {
    const a = await served.connect({ application_name: 'first', options: '-c statement_timeout=1234 -c search_path=other' })
    const b = await served.connect({ application_name: 'second' })
    const row = async (c: typeof a): Promise<unknown> =>
      (await c.query(`select current_setting('application_name') as app, current_setting('statement_timeout') as st, current_setting('search_path') as sp`)).rows[0]
    for (let round = 0; round < 2; round++) {
      expect(await row(a)).toEqual({ app: 'first', st: '1234ms', sp: 'other' })
      expect(await row(b)).toEqual({ app: 'second', st: '0', sp: 'public' })
    }
  })

  it('gives a client that logs in the ALTER DATABASE / ALTER ROLE ... SET settings stored before, with their precedence, under its startup parameters', async () => {
    const admin = await served.connect()
    await admin.query("create role settings_user login; alter database postgres set work_mem = '5MB'; alter database postgres set statement_timeout = '11s'")
    await admin.query("alter role settings_user set work_mem = '6MB'; alter role settings_user in database postgres set statement_timeout = '22s'")
    await admin.query("alter role all set lock_timeout = '3s'")
    try {
      const read = `select current_setting('work_mem') as wm, current_setting('statement_timeout') as st, current_setting('lock_timeout') as lt, current_setting('application_name') as app`
      // Connected before: as on PostgreSQL, stored settings apply at login only.
      expect((await admin.query(read)).rows).toEqual([{ wm: '4MB', st: '0', lt: '0', app: '' }])
      const asPostgres = await served.connect()
      const asUser = await served.connect({ user: 'settings_user' })
      const overridden = await served.connect({ user: 'settings_user', options: '-c work_mem=9MB' })
      for (let round = 0; round < 2; round++) {
        expect((await asPostgres.query(read)).rows).toEqual([{ wm: '5MB', st: '11s', lt: '3s', app: '' }])
        expect((await asUser.query(read)).rows).toEqual([{ wm: '6MB', st: '22s', lt: '3s', app: '' }])
        expect((await overridden.query(read)).rows).toEqual([{ wm: '9MB', st: '22s', lt: '3s', app: '' }])
        expect((await admin.query(read)).rows).toEqual([{ wm: '4MB', st: '0', lt: '0', app: '' }])
      }
    } finally {
      await admin.query('alter database postgres reset all; alter role all reset all; alter role settings_user reset all; alter role settings_user in database postgres reset all')
    }
    // Stored no more: the next login gets none of it.
    const after = await served.connect()
    expect((await after.query(`select current_setting('work_mem') as wm`)).rows).toEqual([{ wm: '4MB' }])
  })

  it('keeps a SET made inside a transaction only if it commits', async () => {
    const a = await served.connect()
    const b = await served.connect()
    await a.query('begin')
    await a.query(`set datestyle = 'German'`)
    await a.query('rollback')
    await b.query('select 1')
    expect((await a.query(`select current_setting('DateStyle') as v`)).rows).toEqual([{ v: 'ISO, MDY' }])
    await a.query('begin')
    await a.query(`set datestyle = 'German'`)
    await a.query('commit')
    await b.query('select 1')
    expect((await a.query(`select current_setting('DateStyle') as v`)).rows).toEqual([{ v: 'German, DMY' }])
    expect((await b.query(`select current_setting('DateStyle') as v`)).rows).toEqual([{ v: 'ISO, MDY' }])
  })
})

describe('stored settings under the role option', () => {
  const served = useServedDatabase({ role: 'app' })

  it("gives every new client the settings stored for the role all clients run as, whatever user name it logged in with", async () => {
    const first = await served.connect()
    // Under --role app, a client may store settings for its own role (not the database's: app does not own it).
    await first.query("alter role app set work_mem = '7MB'")
    const next = await served.connect({ user: 'postgres' })
    expect((await next.query(`select current_user as who, current_setting('work_mem') as wm`)).rows).toEqual([{ who: 'app', wm: '7MB' }])
    expect((await first.query(`select current_setting('work_mem') as wm`)).rows).toEqual([{ wm: '4MB' }])
    await first.query('alter role app reset all')
  })

  it('keeps who a new client is when the stored settings name a role or session user, however they were written', async () => {
    const first = await served.connect()
    const stored: string[] = []
    // Plain, Unicode-escaped and dynamic forms; PostgreSQL may refuse to store some, the others must not act.
    for (const sql of [
      "alter role app set role = 'postgres'",
      String.raw`alter role app set U&"\0072ole" = 'postgres'`,
      `do $$ begin execute format('alter role app set %I = %L', 'session_authorization', 'postgres'); end $$`,
    ]) {
      try {
        await first.query(sql)
        stored.push(sql)
      } catch {
        // Refused as PostgreSQL refuses it.
      }
    }
    expect(stored.length).toBeGreaterThan(0)
    const next = await served.connect()
    expect((await next.query(`select current_user as who, session_user as su`)).rows).toEqual([{ who: 'app', su: 'app' }])
    await first.query('alter role app reset all')
  })
})

