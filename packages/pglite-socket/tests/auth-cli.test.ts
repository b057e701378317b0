import { writeFileSync } from 'node:fs'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { join } from 'node:path'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { within } from '@pgwasm/test-support/async'
import { errorFields } from '@pgwasm/test-support/backend'
import { frame, queryFrame, startupPacket } from '@pgwasm/test-support/frontend'
import { HOST } from '@pgwasm/test-support/net'
import { hasProgram, libpqEnv, run } from '@pgwasm/test-support/processes'
import { RawClient, withRawClient } from '@pgwasm/test-support/raw-client'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { AUTH_METHODS, PGliteServer } from '../src/index.js'
import { Cli, endQuietly, runCli, cliEnv, serve, useDatabase, type Served } from './helpers.js'

const hasPsql = hasProgram('psql')
const WAIT_MS = 10_000
const CLI_MS = 60_000


describe('password authentication', () => {
  const database = useDatabase()

  describe.each(AUTH_METHODS.map((method) => ({ method })))('authMethod $method', ({ method }) => {
    let served: Served

    beforeAll(async () => {
      served = await serve(database.db, { password: 'secret', authMethod: method })
    })

    afterAll(async () => {
      await served?.server.stop()
    })

    it('lets pg in with the right password', async () => {
      const client = new pg.Client({ host: HOST, port: served.port, user: 'postgres', database: 'postgres', password: 'secret' })
      try {
        await client.connect()
        expect((await client.query('select current_user as u')).rows).toEqual([{ u: 'postgres' }])
      } finally {
        await endQuietly(client)
      }
    })

    it('refuses pg with a wrong password with 28P01', async () => {
      const client = new pg.Client({ host: HOST, port: served.port, user: 'postgres', database: 'postgres', password: 'wrong' })
      client.on('error', () => {})
      try {
        await expect(client.connect()).rejects.toMatchObject({ code: '28P01' })
      } finally {
        await endQuietly(client)
      }
    })

    it.skipIf(!hasPsql)('lets psql in with the right password from PGPASSWORD [needs psql]', async () => {
      const result = await run('psql', ['-X', '-A', '-t', '-w', '-c', 'select 40 + 2', served.url], {
        timeoutMs: 30_000,
        env: { ...libpqEnv(), PGPASSWORD: 'secret' },
      })
      expect(result.stderr).toBe('')
      expect(result.stdout).toBe('42\n')
    })

    it.skipIf(!hasPsql)('refuses psql with a wrong password [needs psql]', async () => {
      const result = await run('psql', ['-X', '-A', '-t', '-w', '-c', 'select 1', served.url], {
        timeoutMs: 30_000,
        env: { ...libpqEnv(), PGPASSWORD: 'wrong' },
      })
      expect(result.code).not.toBe(0)
      expect(result.stderr).toContain('password authentication failed for user "postgres"')
    })
  })

  describe('scram-sha-256 with postgres.js', () => {
    let served: Served

    beforeAll(async () => {
      served = await serve(database.db, { password: 'pä§§wörd', authMethod: 'scram-sha-256' })
    })

    afterAll(async () => {
      await served?.server.stop()
    })

    it('lets postgres.js in with a non-ASCII password', async () => {
      const sql = postgres(served.url, { password: 'pä§§wörd', max: 1, connect_timeout: 20 })
      try {
        expect((await sql`select ${'ok'}::text as v`)[0]!.v).toBe('ok')
      } finally {
        await sql.end({ timeout: 5 })
      }
    })

    it('refuses a client that answers the password request with another message type, with FATAL 08P01', async () => {
      const raw = new RawClient(served.port)
      try {
        await raw.connected
        raw.write(startupPacket())
        expect((await within(raw.next(), WAIT_MS, 'the password request'))?.type).toBe('R')
        raw.write(Buffer.from([0x51, 0, 0, 0, 13, ...Buffer.from('select 1\u0000')]))
        const reply = await within(raw.rest(), WAIT_MS, 'the refusal')
        expect(reply.map((m) => [m.type, errorFields(m.body).S, errorFields(m.body).C])).toEqual([['E', 'FATAL', '08P01']])
      } finally {
        raw.destroy()
      }
    })
  })
})

describe('listening beyond loopback', () => {
  const database = useDatabase()

  for (const host of ['0.0.0.0', '::']) {
    it(`refuses to start on ${host} without a password`, async () => {
      const server = new PGliteServer({ db: database.db, host, port: 0 })
      try {
        await expect(server.start()).rejects.toThrow(/password/)
        expect(server.address).toBeUndefined()
      } finally {
        await server.stop()
      }
    })
  }
})

describe('the CLI', () => {
  let dir: string

  beforeAll(() => {
    dir = tempDir('pgwasm-cli-')
  })

  it('serves a data directory, exits 0 on SIGTERM, and keeps what was committed', { timeout: 180_000 }, async () => {
    const dataDir = join(dir, 'data')
    const cli = new Cli(['--port', '0', '--db', dataDir])
    let db: PGlite | undefined
    try {
      const [, url] = await cli.waitFor(/serving .* at (postgresql:\/\/\S+)/)
      expect(url).toMatch(/^postgresql:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/)
      const client = new pg.Client({ connectionString: url })
      client.on('error', () => {})
      try {
        await client.connect()
        await client.query('create table kept (id int primary key, note text)')
        await client.query('begin')
        await client.query("insert into kept values (1, 'committed'), (2, 'also committed')")
        await client.query('commit')
      } finally {
        await endQuietly(client)
      }
      cli.child.kill('SIGTERM')
      const exit = await within(cli.exited, CLI_MS, 'the CLI to exit after SIGTERM')
      expect(exit, cli.stderr).toEqual({ code: 0, signal: null })
      expect(cli.stdout).toContain('pgwasm-server: stopped')

      db = await PGlite.create(dataDir)
      const { rows } = await db.query('select id, note from kept order by id')
      expect(rows).toEqual([
        { id: 1, note: 'committed' },
        { id: 2, note: 'also committed' },
      ])
    } finally {
      cli.kill()
      await db?.close()
    }
  })

  it('exits non-zero with a clear message when the port is taken', { timeout: 120_000 }, async () => {
    const blocker: Server = createServer()
    await new Promise<void>((resolve, reject) => {
      blocker.once('error', reject)
      blocker.listen(0, HOST, () => resolve())
    })
    const port = (blocker.address() as AddressInfo).port
    try {
      const result = await runCli(['--port', String(port)])
      expect(result.code).toBe(1)
      expect(result.stderr).toContain(`127.0.0.1:${port} is already in use`)
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()))
    }
  })

  it('exits non-zero with a clear message when the data directory is a regular file', { timeout: 120_000 }, async () => {
    const file = join(dir, 'not-a-dir')
    writeFileSync(file, 'just a file\n')
    const result = await runCli(['--port', '0', '--db', file])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`cannot open the database ${file}`)
    expect(result.stdout).not.toContain('serving')
  })

  it('exits 2 with the usage when --port is not a number', { timeout: 120_000 }, async () => {
    const result = await runCli(['--port', 'many'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('--port must be 0-65535, got many')
  })
  it('refuses an empty --password on a non-loopback --host like no password, exiting 1', { timeout: 120_000 }, async () => {
    const result = await runCli(['--port', '0', '--host', '0.0.0.0', '--password', ''], { ...cliEnv(), PGWASM_PASSWORD: '' })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('lets other machines in')
    expect(result.stdout).not.toContain('serving')
  })

  it('holds as much COPY data as --max-copy-bytes allows: more fails the COPY with 57014, less loads', { timeout: 180_000 }, async () => {
    const cli = new Cli(['--port', '0', '--max-copy-bytes', '1kB'])
    try {
      const [, port] = await cli.waitFor(/serving .* at postgresql:\/\/\S+:(\d+)\//)
      await withRawClient(Number(port), async (raw) => {
        raw.write(queryFrame('create table copied (t text)'))
        await raw.until('Z')
        const copy = async (lines: number): Promise<Record<string, string> | undefined> => {
          raw.write(queryFrame('copy copied from stdin'))
          expect((await raw.next())?.type).toBe('G')
          for (let i = 0; i < lines; i++) raw.write(frame('d', Buffer.from(`${'x'.repeat(99)}\n`)))
          raw.write(frame('c'))
          const error = (await raw.until('Z')).find((m) => m.type === 'E')
          return error && errorFields(error.body)
        }
        // 20 lines of 100 bytes (and their frames) pass 1 kB; 5 do not.
        expect(await copy(20)).toMatchObject({ C: '57014', M: expect.stringMatching(/1024 bytes of COPY data/) })
        expect(await copy(5)).toBeUndefined()
        raw.write(queryFrame('select count(*) from copied'))
        const counted = await raw.until('Z')
        expect(counted[1]!.body.subarray(6).toString()).toBe('5')
      })
    } finally {
      cli.kill()
    }
  })

  it('streams a COPY past --max-copy-bytes into the engine, unless --copy-stall-timeout is 0', { timeout: 180_000 }, async () => {
    // The server is another process: this client can send while its engine waits for the data.
    const load = async (args: string[]): Promise<Record<string, string> | string> => {
      const cli = new Cli(['--port', '0', '--max-copy-bytes', '2MB', ...args])
      try {
        const [, port] = await cli.waitFor(/serving .* at postgresql:\/\/\S+:(\d+)\//)
        return await withRawClient(Number(port), async (raw) => {
          raw.write(queryFrame('create table copied (t text)'))
          await raw.until('Z')
          raw.write(queryFrame('copy copied from stdin'))
          expect((await raw.next())?.type).toBe('G')
          const line = `${'x'.repeat(999)}\n`
          for (let i = 0; i < 400; i++) raw.write(frame('d', Buffer.from(line.repeat(10))))
          raw.write(frame('c'))
          const reply = await raw.until('Z')
          const error = reply.find((m) => m.type === 'E')
          return error ? errorFields(error.body) : reply.find((m) => m.type === 'C')!.body.subarray(0, -1).toString()
        })
      } finally {
        cli.kill()
      }
    }
    expect(await load([])).toBe('COPY 4000')
    expect(await load(['--copy-stall-timeout', '0'])).toMatchObject({ C: '57014', M: expect.stringMatching(/2097152 bytes of COPY data/) })
  })

  it('exits 2 with the usage when --max-copy-bytes is not a size', { timeout: 120_000 }, async () => {
    const result = await runCli(['--max-copy-bytes', 'lots'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('--max-copy-bytes must be a whole number of bytes, kB, MB or GB, got lots')
  })

  it('exits 2 with the usage when --max-unread-total is not a size', { timeout: 120_000 }, async () => {
    const result = await runCli(['--max-unread-total', 'plenty'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('--max-unread-total must be a positive whole number of bytes, kB, MB or GB, got plenty')
  })

  it.each([
    ['--idle-in-transaction-timeout', '1m'],
    ['--max-statement-time', 'ten'],
    ['--copy-stall-timeout', 'soon'],
    ['--idle-database-timeout', 'later'],
  ])('exits 2 with the usage when %s is not a number of ms', { timeout: 120_000 }, async (flag, value) => {
    const result = await runCli([flag, value])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(`${flag} must be a whole number of ms >= 0, got ${value}`)
  })
})
