import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { HOST } from '@pgwasm/test-support/net'
import { Cli, endQuietly } from './helpers.js'

/*
 * The attack (issue "hardening", item 5), through pgwasm-server with its
 * default memory ceiling, as an unprivileged role: one batch of 500 PREPAREs
 * of large statements (a 60 MB Query), connect, flood, disconnect, again.
 * Before: the engine's heap (2 GiB at most, below the 4 GB ceiling) filled
 * before the client's share was refused, the catalog read that notes whose
 * statements they are failed, so ~350 statements outlived their client;
 * every other client's `select 1` got 53200; and Postgres' log line of each
 * refused 60 MB batch, gathered a byte at a time, ended the server's process.
 * Now the flood is refused at the client's share of what the heap can
 * reach, its statements go with it, and the others go on. The server runs
 * as its own process, so a crash fails this test instead of the run.
 */

const clis: Cli[] = []
afterAll(() => {
  for (const cli of clis) cli.kill()
})

const LIST = Array.from({ length: 20_000 }, (_, i) => i).join(',')
const FLOOD = Array.from({ length: 500 }, (_, i) => `prepare p${i} as select 1 where 1 in (${LIST})`).join(';')

describe('a flood of PREPAREs refused with 53200, connect after connect', () => {
  it('leaves no statement behind, never refuses the other clients, and the server goes on', async () => {
    const cli = new Cli(['--port', '0', '--role', 'app'])
    clis.push(cli)
    const url = (await cli.waitFor(/serving .* at (postgresql:\/\/\S+)/))[1]!
    const connect = async (): Promise<pg.Client> => {
      const client = new pg.Client({ host: HOST, port: Number(new URL(url).port), user: 'app', database: 'postgres' })
      client.on('error', () => {})
      await within(client.connect(), 30_000, 'a connection')
      return client
    }
    const watcher = await connect()
    try {
      for (let round = 0; round < 3; round++) {
        const flooder = await connect()
        await expect(within(flooder.query(FLOOD), 120_000, `round ${round}'s flood`)).rejects.toMatchObject({ code: '53200' })
        // Another client, while the flooder still holds what it made.
        expect((await within(watcher.query('select 1 as one'), 30_000, "the other client's query")).rows).toEqual([{ one: 1 }])
        await flooder.end()
        const left = await within(
          (async () => {
            for (;;) {
              const { rows } = await watcher.query<{ n: number }>('select count(*)::int as n from pg_prepared_statements where from_sql')
              if (rows[0]!.n === 0) return 0
              await new Promise((resolve) => setTimeout(resolve, 50))
            }
          })(),
          30_000,
          `round ${round}'s statements to go with their client`,
        )
        expect(left).toBe(0)
      }
      expect(cli.child.exitCode).toBeNull()
    } finally {
      await endQuietly(watcher)
    }
  }, 600_000)
})
