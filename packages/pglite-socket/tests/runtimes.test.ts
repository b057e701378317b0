import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { freePort } from '@pgwasm/test-support/net'
import { lastJsonLine, RUNTIMES, startUnder, type Started } from '@pgwasm/test-support/runtimes'

/*
 * pgwasm-server and the pg bridge under Bun and Deno (from the workspace's
 * devDependencies), served to node-postgres clients of this process. The
 * cancel helper needs Node's child processes, so under these runtimes a
 * CancelRequest cannot reach a running statement: the server says so, and
 * statement_timeout still stops one.
 */
const packageDir = fileURLToPath(new URL('..', import.meta.url))

for (const runtime of RUNTIMES) {
  describe(`pgwasm-server under ${runtime.name}`, () => {
    let server: Started
    let url: string

    beforeAll(async () => {
      const port = await freePort()
      server = startUnder(runtime.command, ['dist/cli.js', '--port', String(port)], packageDir)
      url = await within(
        (async () => {
          for (;;) {
            const m = /serving .* at (postgresql:\/\/\S+)/.exec(server.output())
            if (m) return m[1]!
            if (server.child.exitCode !== null) throw new Error(`the server exited: ${server.output()}`)
            await new Promise((resolve) => setTimeout(resolve, 50))
          }
        })(),
        60_000,
        `the server under ${runtime.name} to start`,
      )
    }, 90_000)

    afterAll(async () => {
      // Ctrl-C: the server stops cleanly (checked: it prints that it stopped).
      server?.child.kill('SIGINT')
      await within(server.exited, 30_000, `the server under ${runtime.name} to stop`)
      expect(server.output()).toMatch(/pgwasm-server: stopped/)
    })

    it(`serves pg clients: queries, transactions, LISTEN/NOTIFY between them, and statement_timeout stops a loop [runs under ${runtime.name}]`, async () => {
      const a = new pg.Client({ connectionString: url })
      const b = new pg.Client({ connectionString: url })
      await a.connect()
      await b.connect()
      try {
        expect((await a.query('select 6 * $1::int as n, $2::text as t', [7, 'ünï'])).rows).toEqual([{ n: 42, t: 'ünï' }])
        await a.query('create table kept (x int)')
        await a.query('begin')
        await a.query('insert into kept values (1)')
        await a.query('rollback')
        expect((await b.query('select count(*)::int as n from kept')).rows).toEqual([{ n: 0 }])
        const heard = new Promise<string | undefined>((resolve) => b.on('notification', (n) => resolve(n.payload)))
        await b.query('listen ping')
        await a.query(`notify ping, 'pong'`)
        expect(await within(heard, 10_000, 'the notification')).toBe('pong')
        await a.query(`set statement_timeout = '300ms'`)
        await expect(a.query('do $$ begin loop end loop; end $$')).rejects.toMatchObject({ code: '57014' })
        expect((await a.query('select 1 as one')).rows).toEqual([{ one: 1 }])
        expect(server.output()).toMatch(/the cancel helper needs Node on Unix, and this is (Bun|Deno)/)
      } finally {
        await a.end()
        await b.end()
      }
    })

    it(`runs node-postgres on an in-process instance through the bridge [runs under ${runtime.name}]`, async () => {
      const run = startUnder(runtime.command, [fileURLToPath(new URL('./fixtures/bridge-smoke.mjs', import.meta.url))], packageDir)
      const status = await within(run.exited, 60_000, `the bridge script under ${runtime.name}`)
      expect(status, run.output()).toBe(0)
      expect(lastJsonLine(run.stdout())).toEqual({ values: { n: 42, t: 'ünï' }, rolledBack: true, error: '22012' })
    })
  })
}
