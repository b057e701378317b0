import { readFile } from 'node:fs/promises'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cli, RawClient, queryFrame, within } from './helpers.js'

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
const require = (await import('node:module')).createRequire(import.meta.url)

/** A small seeded generator: the order of the attacks is random but repeatable. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0
    return state / 2 ** 32
  }
}

const COLUMNS = Array.from({ length: 200 }, (_, i) => `${i} as c${i}`).join(', ')

function unicodeEscaped(name: string): string {
  return `U&"${[...name].map((ch) => `\\${ch.codePointAt(0)!.toString(16).padStart(4, '0')}`).join('')}"`
}

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
    const ticker = setInterval(() => {
      console.log('T', Math.round(performance.now() - started), done.join(','), errors.length)
      if (performance.now() - started > 12000) {
        console.log('STDERR', cli.stderr.slice(-3000), 'STDOUT', cli.stdout.slice(-2000))
        console.log(require('node:child_process').execSync(`ps -o pid,pcpu,rss,stat -p ${cli.child.pid}`).toString())
      }
    }, 2000)
    const attacked = hostile.map(async (h, i) => {
      const next = random(i + 1)
      for (let k = 0; k < 12 && performance.now() - started < HOSTILE_MS; k++) {
        const attack = attacks[Math.floor(next() * attacks.length)]!
        console.log('H', i, 'attack', attacks.indexOf(attack), Math.round(performance.now() - started), done.join(','))
        const res = await within(attack(h, i).catch((err: unknown) => err), 60_000, `attack ${attacks.indexOf(attack)}`)
        console.log('E', i, 'attack', attacks.indexOf(attack), Math.round(performance.now() - started), String((res as any)?.code ?? 'ok'), String((res as any)?.message ?? '').slice(0, 80))
        // An attack that failed in a transaction block leaves it for the next.
        await h.query('rollback').catch(() => {})
      }
    })
    try {
      await Promise.all(attacked)
    } finally {
      stop = true
      console.log('stopping', done.join(','))
      await Promise.all(workload)
      clearInterval(ticker)
      clearInterval(sampler)
    }

    expect(errors).toEqual([])
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
    expect(grownMb).toBeLessThan(3 * MAX_MB + 256)
    await Promise.all([...workers, ...hostile].map((c) => c.end().catch(() => {})))
  }, 180_000)
})
