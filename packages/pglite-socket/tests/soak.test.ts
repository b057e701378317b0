import { readFile } from 'node:fs/promises'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { queryFrame } from '@pgwasm/test-support/frontend'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { COLUMNS, seededRandom, unicodeEscaped } from './attacks.js'
import { Cli } from './helpers.js'

/*
 * 30 clients on one server: 10 hostile, running the attacks of the issue
 * "shared engine, separate clients" in random order (bounded in count and
 * time), and 20 running a workload whose every answer is checked. The 20
 * must see no error, no lost notification and no foreign setting; the
 * server's memory stays within its bound; the data is whole at the end.
 */

const MAX_MB = 384
const HOSTILE = 10
const WORKERS = 20
const HOSTILE_MS = 20_000

describe('a soak of hostile and ordinary clients on one server', () => {
  let cli: Cli
  let url: string
  let port: number
  beforeAll(async () => {
    cli = new Cli(['--port', '0', '--role', 'app', '--max-memory', `${MAX_MB}MB`])
    url = (await cli.waitFor(/serving .* at (postgresql:\/\/\S+)/))[1]!
    port = Number(new URL(url).port)
    const setup = new pg.Client({ connectionString: url })
    await setup.connect()
    await setup.query('create table ledger (client int, n int, primary key (client, n))')
    await setup.end()
  }, 120_000)
  afterAll(() => cli?.kill())

  async function client(): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: url })
    c.on('error', () => {})
    await c.connect()
    return c
  }

  it('gives the 20 ordinary clients no error and their data whole, with the server within its memory bound', async () => {
    const statusKb = async (field: string): Promise<number> => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(await readFile(`/proc/${cli.child.pid}/status`, 'utf8'))?.[1])
    const baselineKb = await statusKb('VmRSS')
    const workers = await Promise.all(Array.from({ length: WORKERS }, () => client()))
    const hostile = await Promise.all(Array.from({ length: HOSTILE }, () => client()))
    const pids = workers.map((w) => (w as unknown as { processID: number }).processID)

    let stop = false
    const errors: unknown[] = []
    const done = new Array<number>(WORKERS).fill(0)
    const heard = new Array<number>(WORKERS).fill(0)
    const workload = workers.map(async (w, me) => {
      w.on('notification', () => heard[me]!++)
      await w.query(`listen w${me}`)
      const searchPath = (await w.query('show search_path')).rows[0].search_path as string
      for (let n = 1; !stop; n++) {
        try {
          await w.query('begin')
          await w.query({ name: 'add', text: 'insert into ledger values ($1, $2)', values: [me, n] })
          await w.query('commit')
          const { rows } = await w.query({ name: 'mine', text: 'select count(*)::int as n from ledger where client = $1', values: [me] })
          expect(rows).toEqual([{ n }])
          expect((await w.query('show search_path')).rows).toEqual([{ search_path: searchPath }])
          await w.query(`notify w${me}, '${n}'`)
          done[me] = n
        } catch (err) {
          errors.push(err)
          await w.query('rollback').catch(() => {})
          return
        }
      }
    })

    let peakKb = baselineKb
    const sampler = setInterval(() => {
      void statusKb('VmRSS').then(
        (kb) => (peakKb = Math.max(peakKb, kb)),
        () => {},
      )
    }, 100)

    const attacks: ((h: pg.Client, i: number) => Promise<unknown>)[] = [
      async (h) => {
        for (let batch = 0; batch < 6; batch++) {
          let sql = ''
          for (let k = 0; k < 300; k++) sql += `prepare f${batch}_${k} as select ${COLUMNS};`
          await h.query(sql)
        }
      },
      (h) => h.query('deallocate all'),
      (h, i) => h.query(`deallocate ${unicodeEscaped(`c${pids[i % WORKERS]}_mine`)}`),
      (h, i) => h.query(`do $$ begin execute format('deallocate %I', 'c${pids[i % WORKERS]}_add'); end $$`),
      (h) => h.query(`do $$ begin execute 'deallocate all'; end $$`),
      (h, i) => h.query(`prepare ${unicodeEscaped(`c${pids[i % WORKERS]}_mine`)}(int) as select 666 as n`),
      (h, i) =>
        h.query(
          `create or replace function evil${i}() returns void language plpgsql as $$ begin perform set_config('search_path', 'pg_catalog', false); ` +
            `perform set_config('default_transaction_read_only', 'on', false); end $$; select evil${i}()`,
        ),
      (h) => h.query(`do $$ begin execute 'unlisten *'; end $$`),
      (h) => h.query(`do $$ begin execute 'set transaction_timeout = ''50ms'''; end $$`),
      (h, i) => h.query(`select pg_advisory_lock(${i}); select pg_advisory_unlock_all()`),
      (h) => h.query(`set statement_timeout = '200ms'; do $$ begin loop end loop; end $$`),
      (h) => h.query(`set statement_timeout = 0; select length(repeat(md5('x'), 10000000))`),
      (h) => h.query('truncate pg_database'),
      async () => {
        const raw = new RawClient(port)
        await raw.handshake()
        raw.socket.pause()
        raw.write(queryFrame("select repeat('x', 1000000) from generate_series(1, 30)"))
        await new Promise((resolve) => setTimeout(resolve, 500))
        raw.destroy()
      },
    ]
    const started = performance.now()
    const attacked = hostile.map(async (h, i) => {
      const next = seededRandom(i + 1)
      for (let k = 0; k < 12 && performance.now() - started < HOSTILE_MS; k++) {
        const attack = attacks[Math.floor(next() * attacks.length)]!
        await within(attack(h, i).catch((err: unknown) => err), 60_000, `attack ${attacks.indexOf(attack)}`)
        // An attack that failed in a transaction block leaves it for the next.
        await h.query('rollback').catch(() => {})
      }
    })
    try {
      await Promise.all(attacked)
    } finally {
      stop = true
      await Promise.all(workload)
      clearInterval(sampler)
    }

    expect(errors.map((e) => `${(e as { code?: string }).code ?? ''} ${(e as Error).message}`).join('\n')).toBe('')
    expect(Math.min(...done)).toBeGreaterThan(0)
    // Every notification each ordinary client sent itself came back, whatever UNLISTEN the others ran.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(heard).toEqual(done)
    const check = await client()
    const { rows } = await check.query<{ client: number; n: number; top: number }>('select client, count(*)::int as n, max(n) as top from ledger group by client order by client')
    expect(rows).toEqual(done.map((n, me) => ({ client: me, n, top: n })))
    await check.end()
    // The bound of the memory ceiling test (runaway.test.ts), plus the unread output of the raw clients.
    const grownMb = (peakKb - baselineKb) / 1024
    if (process.env.PGWASM_SOAK_REPORT) console.log(`soak: peak RSS ${Math.round(grownMb)} MB above the server's start; ordinary rounds ${done.join(',')}`)
    expect(grownMb).toBeLessThan(3 * MAX_MB + 256)
    await Promise.all([...workers, ...hostile].map((c) => c.end().catch(() => {})))
  }, 180_000)
})
