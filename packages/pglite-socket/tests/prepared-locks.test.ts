import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { HOST } from '@pgwasm/test-support/net'
import { unicodeEscaped } from './attacks.js'
import { Cli, endQuietly } from './helpers.js'

/*
 * The attack (issue "hardening", item 1), through pgwasm-server as an
 * unprivileged role: a prepared transaction plus a conflicting write, from
 * the same client or another. The engine used to spin forever, every other
 * client, new connections, CancelRequest and SIGTERM ignored. Now the write
 * fails at once with 55P03, and everyone goes on. The server runs as its own
 * process, so a hang fails this test instead of freezing it.
 */

const clis: Cli[] = []
const clients: pg.Client[] = []

afterAll(async () => {
  await Promise.all(clients.map((c) => endQuietly(c)))
  for (const cli of clis) cli.kill()
})

async function server(): Promise<(user?: string) => Promise<pg.Client>> {
  const cli = new Cli(['--port', '0', '--role', 'app'])
  clis.push(cli)
  const url = (await cli.waitFor(/serving .* at (postgresql:\/\/\S+)/))[1]!
  return async () => {
    const client = new pg.Client({ host: HOST, port: Number(new URL(url).port), user: 'app', database: 'postgres' })
    client.on('error', () => {})
    await within(client.connect(), 10_000, 'a connection')
    clients.push(client)
    return client
  }
}

const LOCKED = { code: '55P03', message: 'could not obtain lock: a prepared transaction holds it' }

describe('a prepared transaction and a conflicting write, through the server', () => {
  it('fail the write at once, from the same client and another, in plain, escaped and dynamic forms; the others go on', async () => {
    const connect = await server()
    const a = await connect()
    const b = await connect()
    await a.query('create table lk (id int primary key)')
    await a.query('begin')
    await a.query('insert into lk values (1)')
    await a.query(`prepare transaction 'g'`)
    // A function whose SET clause asks for a long lock_timeout waits no more than the rest.
    await b.query(`create function put_one() returns void language sql set lock_timeout = '60s' as $$ insert into lk values (1) $$`)
    for (const [client, sql] of [
      [a, 'insert into lk values (1)'],
      [b, 'insert into "lk" values (1)'],
      [b, `insert into ${unicodeEscaped('lk')} values (1)`],
      [b, `do $$ begin execute format('insert into %I values (1)', 'lk'); end $$`],
      [b, 'select put_one()'],
    ] as const) {
      await expect(within(client.query(sql), 10_000, sql)).rejects.toMatchObject(LOCKED)
    }
    // Everyone, and a new client, still gets answers at once.
    expect((await within(a.query('select 1 as one'), 10_000, "the writer's next query")).rows).toEqual([{ one: 1 }])
    const c = await connect()
    expect((await within(c.query('select gid from pg_prepared_xacts'), 10_000, "a new client's query")).rows).toEqual([{ gid: 'g' }])
    // The prepared transaction can still be ended, by another client.
    await within(c.query(`commit prepared 'g'`), 10_000, 'COMMIT PREPARED')
    await expect(b.query('insert into lk values (1)')).rejects.toMatchObject({ code: '23505' })
    expect((await b.query('select id from lk')).rows).toEqual([{ id: 1 }])
  }, 120_000)
})
