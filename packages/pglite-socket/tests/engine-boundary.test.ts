import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { hostileSideModule } from '@pgwasm/test-support/hostile-side-module'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { endQuietly, useServedDatabase, type TestClient } from './helpers.js'

/*
 * The engine's boundary seen from the server: one client's hostile SQL
 * runs no code in the server process, does not end the engine, and the
 * other clients, working all the while, see no error and lose nothing.
 */

const ROWS = 300

describe('hostile SQL through pgwasm-server', () => {
  const served = useServedDatabase({}, async (db) => {
    await db.exec(`create table kept (id int primary key, v text); insert into kept select g, md5(g::text) from generate_series(1, ${ROWS}) g`)
  })
  const dir = tempDir('pgwasm-socket-boundary-')
  const marker = join(dir, 'ran')
  afterAll(() => {
    delete (globalThis as { __pgwasmHostile?: string }).__pgwasmHostile
  })

  /**
   * Ten clients that each insert into their own table and read the shared
   * one in a loop until stopped; every error they see is kept.
   */
  async function bystanders(): Promise<{ stop(): Promise<{ errors: unknown[]; inserted: number[] }> }> {
    const clients: TestClient[] = []
    for (let i = 0; i < 10; i++) clients.push(await served.connect())
    let running = true
    const errors: unknown[] = []
    const inserted = clients.map(() => 0)
    const loops = clients.map(async (c, i) => {
      await c.query(`create table if not exists mine_${i} (n int)`)
      await c.query(`truncate mine_${i}`)
      while (running) {
        try {
          await c.query(`insert into mine_${i} values ($1)`, [inserted[i]])
          inserted[i]!++
          const { rows } = await c.query<{ n: number }>('select count(*)::int as n from kept')
          if (rows[0]!.n !== ROWS) errors.push(new Error(`client ${i} saw ${rows[0]!.n} rows`))
        } catch (err) {
          errors.push(err)
          return
        }
      }
    })
    return {
      async stop() {
        running = false
        await Promise.all(loops)
        for (const [i, c] of clients.entries()) {
          const { rows } = await c.query<{ n: number }>(`select count(*)::int as n from mine_${i}`)
          if (rows[0]!.n !== inserted[i]) errors.push(new Error(`client ${i} inserted ${inserted[i]} rows, ${rows[0]!.n} are there`))
          errors.push(...c.errors)
          await endQuietly(c)
        }
        return { errors, inserted }
      },
    }
  }

  const attacks: Array<[string, (c: TestClient) => Promise<unknown>, string | undefined]> = [
    [
      'a side module written with lo_export, then LOAD',
      async (c) => {
        const module = hostileSideModule(
          `globalThis.__pgwasmHostile = 'ran'; require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`,
        )
        const { rows } = await c.query<{ oid: number }>('select lo_from_bytea(0, $1) as oid', [Buffer.from(module)])
        await c.query(`select lo_export($1, '/tmp/x.so')`, [rows[0]!.oid])
        await c.query(`load '/tmp/x.so'`)
      },
      '42501',
    ],
    ['set exit_on_error = on', (c) => c.query('set exit_on_error = on'), '22023'],
    ['COPY over the data directory\'s PG_VERSION', (c) => c.query(`copy (select 'x') to '/pglite/data/PG_VERSION'`), '42501'],
    ['ALTER SYSTEM of a setting no start can satisfy', (c) => c.query(`alter system set shared_buffers = '100GB'`), '0A000'],
    ['10,000 nested jsonb arrays', (c) => c.query(`select '${'['.repeat(10000)}${']'.repeat(10000)}'::jsonb`), '54001'],
    [
      'a recursive SQL function',
      async (c) => {
        await c.query(`create or replace function f(int) returns int language sql as $$ select f($1 + 1) $$`)
        await c.query('select f(1)')
      },
      '54001',
    ],
    [
      'idle_session_timeout, then idle',
      async (c) => {
        await c.query(`set idle_session_timeout = '300ms'`)
        await new Promise((r) => setTimeout(r, 700))
      },
      undefined,
    ],
  ]

  it.each(attacks)('%s: the client gets its error, the ten others none, and the data is all there', async (_name, attack, code) => {
    const others = await bystanders()
    const attacker = await served.connect()
    let error: { code?: string } | undefined
    await attack(attacker).catch((err: { code?: string }) => {
      error = err
    })
    if (code) expect(error?.code).toBe(code)
    await new Promise((r) => setTimeout(r, 200))
    const { errors, inserted } = await others.stop()
    expect(errors).toEqual([])
    expect(inserted.every((n) => n > 0)).toBe(true)
    expect((globalThis as { __pgwasmHostile?: string }).__pgwasmHostile).toBeUndefined()
    expect(existsSync(marker)).toBe(false)
    const check = await served.connect()
    expect((await check.query<{ n: number }>('select count(*)::int as n from kept')).rows).toEqual([{ n: ROWS }])
    await endQuietly(attacker)
  })
})

describe('pgwasm-server with a role for its clients', () => {
  const served = useServedDatabase({ role: 'app' }, async (db) => {
    await db.exec(`create table owned_by_superuser (x int)`)
  })

  it('runs every client as the role, made when missing, and no client can become the superuser', async () => {
    const c = await served.connect({ user: 'postgres' })
    expect((await c.query('select current_user as c, session_user as s')).rows).toEqual([{ c: 'app', s: 'app' }])
    const fails = async (sql: string): Promise<string | undefined> => c.query(sql).then(() => undefined, (err: { code?: string }) => err.code)
    expect(await fails('set session authorization postgres')).toBe('22023')
    expect(await fails('discard all')).toBeUndefined()
    expect(await fails('set role postgres')).toBe('42501')
    expect(await fails('select * from owned_by_superuser')).toBe('42501')
    expect(await fails(`select lo_export(lo_from_bytea(0, '\\x00'), '/tmp/x.so')`)).toBe('42501')
    expect(await fails(`select pg_read_file('/pglite/data/postgresql.conf')`)).toBe('42501')
    expect(await fails(`copy (select 1) to '/tmp/out'`)).toBe('42501')
    await c.query('create table mine (x int); insert into mine values (1)')
    const other = await served.connect()
    expect((await other.query('select x, current_user as u from mine')).rows).toEqual([{ x: 1, u: 'app' }])
  })
})
