import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { REPORTED } from '../src/pooler/reported-settings.js'
import { useServedDatabase, type TestClient } from './helpers.js'

/*
 * PostgreSQL tells a client of each reported setting at startup and again,
 * in a ParameterStatus before ReadyForQuery, whenever its value changes:
 * clients parse dates, times and intervals by the styles they were told.
 */

interface Watched {
  client: TestClient
  /** Every ParameterStatus since the last `take()`, in order. */
  take(): [string, string][]
  /** The value of each setting as last told. */
  readonly told: Map<string, string>
}

type Connection = { on(event: 'parameterStatus', listener: (m: { parameterName: string; parameterValue: string }) => void): void }

describe('ParameterStatus for the reported settings', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table stamps (id int primary key, at timestamp)'))

  async function watched(): Promise<Watched> {
    const told = new Map<string, string>()
    let seen: [string, string][] = []
    const client = new pg.Client({ host: '127.0.0.1', port: served.port, user: 'postgres', database: 'postgres' }) as TestClient
    client.errors = []
    client.on('error', (e) => client.errors.push(e))
    ;(client as unknown as { connection: Connection }).connection.on('parameterStatus', (m) => {
      told.set(m.parameterName, m.parameterValue)
      seen.push([m.parameterName, m.parameterValue])
    })
    await client.connect()
    return {
      client,
      told,
      take: () => {
        const out = seen
        seen = []
        return out
      },
    }
  }

  it('tells each reported setting at startup, with the values the session has', async () => {
    const w = await watched()
    try {
      expect(w.take().map(([name]) => name).sort()).toEqual([...REPORTED].sort())
      const { rows } = await w.client.query<{ d: string; tz: string; sp: string }>(
        `select current_setting('DateStyle') d, current_setting('TimeZone') tz, current_setting('search_path') sp`,
      )
      expect({ d: w.told.get('DateStyle'), tz: w.told.get('TimeZone'), sp: w.told.get('search_path') }).toEqual(rows[0])
    } finally {
      await w.client.end()
    }
  })

  it('reports what SET, RESET and set_config() change, in the same round trip, and nothing when nothing changed', async () => {
    const w = await watched()
    try {
      w.take()
      await w.client.query(`set datestyle = 'SQL, DMY'`)
      expect(w.take()).toEqual([['DateStyle', 'SQL, DMY']])
      await w.client.query(`set timezone = 'Asia/Tokyo'`)
      expect(w.take()).toEqual([['TimeZone', 'Asia/Tokyo']])
      await w.client.query(`set intervalstyle = 'iso_8601'`)
      expect(w.take()).toEqual([['IntervalStyle', 'iso_8601']])
      await w.client.query(`select set_config('search_path', 'pg_catalog, public', false)`)
      expect(w.take()).toEqual([['search_path', 'pg_catalog, public']])
      await w.client.query(`set application_name = 'reports'`)
      expect(w.take()).toEqual([['application_name', 'reports']])
      await w.client.query('select 1')
      await w.client.query(`set work_mem = '8MB'`)
      expect(w.take()).toEqual([])
      await w.client.query('reset datestyle')
      expect(w.take()).toEqual([['DateStyle', 'ISO, MDY']])
      await w.client.query('reset all')
      expect(new Map(w.take())).toEqual(
        new Map([
          ['TimeZone', 'UTC'],
          ['IntervalStyle', 'postgres'],
          ['search_path', 'public'],
          ['application_name', ''],
        ]),
      )
    } finally {
      await w.client.end()
    }
  })

  it("reports a setting a function changes, but not one its SET clause puts back", async () => {
    const w = await watched()
    try {
      await w.client.query(`create function rs_styles() returns void language plpgsql set timezone = 'America/New_York' as $$
        begin perform set_config('datestyle', 'German', false); end $$`)
      w.take()
      await w.client.query('select rs_styles()')
      expect(w.take()).toEqual([['DateStyle', 'German, DMY']])
    } finally {
      await w.client.query('reset datestyle')
      await w.client.end()
    }
  })

  it('reports the value a rolled-back SET leaves, at the ROLLBACK', async () => {
    const w = await watched()
    try {
      await w.client.query('begin')
      w.take()
      await w.client.query(`set timezone = 'Europe/Paris'`)
      expect(w.take()).toEqual([['TimeZone', 'Europe/Paris']])
      await w.client.query('rollback')
      expect(w.take()).toEqual([['TimeZone', 'UTC']])
    } finally {
      await w.client.end()
    }
  })

  it('tells each of two clients only what changed as that client sees it, across switches', async () => {
    const a = await watched()
    const b = await watched()
    try {
      a.take()
      b.take()
      await a.client.query(`set datestyle = 'SQL, DMY'`)
      expect(a.take()).toEqual([['DateStyle', 'SQL, DMY']])
      // B runs with its own (default) DateStyle: nothing changed for it.
      await b.client.query('select 1')
      expect(b.take()).toEqual([])
      await a.client.query('select 1')
      expect(a.take()).toEqual([])
      // The in-process caller's own SET is not a client's either.
      await served.db.exec(`set timezone = 'Asia/Kolkata'`)
      await b.client.query('select 1')
      await a.client.query('select 1')
      expect([a.take(), b.take()]).toEqual([[], []])
      expect((await b.client.query<{ tz: string }>(`select current_setting('TimeZone') tz`)).rows[0]!.tz).toBe(b.told.get('TimeZone'))
    } finally {
      await served.db.exec('reset timezone')
      await a.client.end()
      await b.client.end()
    }
  })

  it('lets a client that parses dates by the reported DateStyle read back what it wrote, in SQL and German styles', async () => {
    const w = await watched()
    try {
      const written = '2026-11-28 01:55:26.198'
      await w.client.query('insert into stamps values (1, $1)', [written])
      for (const style of ['SQL, DMY', 'German', 'SQL, MDY']) {
        await w.client.query(`set datestyle = '${style}'`)
        const { rows } = await w.client.query<{ at: string }>('select at::text as at from stamps where id = 1')
        expect(parseByDateStyle(rows[0]!.at, w.told.get('DateStyle')!)).toBe(written)
      }
    } finally {
      await w.client.end()
    }
  })
})

/** A timestamp as a client reads it by the DateStyle it was told (SQL and German styles), back to ISO. */
function parseByDateStyle(text: string, dateStyle: string): string {
  const [style, order] = dateStyle.split(',').map((s) => s.trim())
  const match = /^(\d+)[/.-](\d+)[/.-](\d+) (.*)$/.exec(text)
  if (!match) throw new Error(`not a ${dateStyle} timestamp: ${text}`)
  const [, first, second, year, time] = match
  const dayFirst = style === 'German' || order === 'DMY'
  const [day, month] = dayFirst ? [first!, second!] : [second!, first!]
  const date = new Date(`${year}-${month}-${day}T00:00:00Z`)
  if (Number.isNaN(date.getTime()) || date.getUTCDate() !== Number(day)) throw new Error(`day is out of range: ${text} read as ${dateStyle}`)
  return `${year}-${month}-${day} ${time}`
}
