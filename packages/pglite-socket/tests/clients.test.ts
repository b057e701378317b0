import { statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deferred } from '@pgwasm/test-support/async'
import { errorFields } from '@pgwasm/test-support/backend'
import { cstr, frame, queryFrame } from '@pgwasm/test-support/frontend'
import { hasProgram, libpqEnv, run } from '@pgwasm/test-support/processes'
import { withRawClient } from '@pgwasm/test-support/raw-client'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { PGliteServer } from '../src/index.js'
import { endQuietly, useDatabase, useServedDatabase, type TestClient } from './helpers.js'

const hasPsql = hasProgram('psql')
const hasPgbench = hasProgram('pgbench')

describe('pg (node-postgres)', () => {
  const served = useServedDatabase()
  let client: TestClient

  beforeAll(async () => {
    client = await served.connect()
  })

  it('returns one result per statement of a multi-statement simple query', async () => {
    const results = (await client.query(
      'create table multi (id int); insert into multi values (1), (2); select sum(id)::int as total from multi',
    )) as unknown as pg.QueryResult[]
    expect(results.map((r) => r.command)).toEqual(['CREATE', 'INSERT', 'SELECT'])
    expect(results[1]!.rowCount).toBe(2)
    expect(results[2]!.rows).toEqual([{ total: 3 }])
  })

  it('binds parameters of an extended query', async () => {
    const { rows } = await client.query('select $1::int + $2::int as sum, $3::text as label, $4::text is null as missing', [
      2,
      40,
      'x',
      null,
    ])
    expect(rows).toEqual([{ sum: 42, label: 'x', missing: true }])
  })

  it('runs a named prepared statement several times with different parameters', async () => {
    const values: number[] = []
    for (const i of [1, 2, 3]) {
      const { rows } = await client.query({ name: 'double_it', text: 'select $1::int * 2 as v', values: [i] })
      values.push(rows[0].v)
    }
    expect(values).toEqual([2, 4, 6])
  })

  it('answers 50 queries issued without awaiting, each correctly and in order', async () => {
    const order: number[] = []
    const pending = Array.from({ length: 50 }, (_, i) =>
      client.query('select $1::int as i, repeat($2::text, $1::int) as s', [i, 'ab']).then((r) => {
        order.push(i)
        return r.rows[0]
      }),
    )
    const rows = await Promise.all(pending)
    expect(rows).toEqual(Array.from({ length: 50 }, (_, i) => ({ i, s: 'ab'.repeat(i) })))
    expect(order).toEqual(Array.from({ length: 50 }, (_, i) => i))
  })

  it('reports bad SQL as an error with its SQLSTATE and keeps the connection usable', async () => {
    await expect(client.query('selec 1')).rejects.toMatchObject({ code: '42601' })
    await expect(client.query('select * from no_such_table')).rejects.toMatchObject({ code: '42P01' })
    const { rows } = await client.query('select 1 as ok')
    expect(rows).toEqual([{ ok: 1 }])
    expect(client.errors).toEqual([])
  })

  it('reports an error inside a transaction as 25P02 until ROLLBACK, then works again', async () => {
    await client.query('begin')
    await expect(client.query('select 1/0')).rejects.toMatchObject({ code: '22012' })
    await expect(client.query('select 1')).rejects.toMatchObject({ code: '25P02' })
    await client.query('rollback')
    expect((await client.query('select 2 as two')).rows).toEqual([{ two: 2 }])
  })

  it('returns a 10 MB result intact while another client LISTENs', async () => {
    const listener = await served.connect()
    try {
      // With a LISTEN anywhere, every frame of the result goes through the notification splitter.
      await listener.query('listen big_result')
      const { rows } = await client.query<{ i: number; s: string }>(
        "select i, repeat(md5(i::text), 10) as s from generate_series(1, 30000) as i",
      )
      expect(rows.length).toBe(30_000)
      const bad = rows.filter((r, k) => r.i !== k + 1 || r.s.length !== 320)
      expect(bad).toEqual([])
      const sums = await client.query<{ digest: string }>(
        "select md5(string_agg(repeat(md5(i::text), 10), ',' order by i)) as digest from generate_series(1, 30000) as i",
      )
      const { createHash } = await import('node:crypto')
      expect(createHash('md5').update(rows.map((r) => r.s).join(',')).digest('hex')).toBe(sums.rows[0]!.digest)
    } finally {
      await endQuietly(listener)
    }
  })

  it('accepts a 4 MB query text', async () => {
    const big = 'x'.repeat(4 * 1024 * 1024)
    const { rows } = await client.query(`select length('${big}') as n`)
    expect(rows).toEqual([{ n: 4 * 1024 * 1024 }])
  })

  it('emits RAISE NOTICE as a notice event before the query resolves', async () => {
    const notice = deferred<{ message?: string; severity?: string }>()
    client.once('notice', (n) => notice.resolve(n))
    let resolved = false
    const query = client.query(`do $$ begin raise notice 'hello %', 42; end $$`).then(() => (resolved = true))
    const n = await notice.promise
    expect(resolved).toBe(false)
    expect(n.message).toBe('hello 42')
    expect(n.severity).toBe('NOTICE')
    await query
  })
})

describe('raw protocol: COPY and pipelining', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table copied (id int primary key, name text)'))

  it('loads rows with COPY FROM STDIN sent as CopyData frames', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame('copy copied from stdin'))
      expect((await raw.next())?.type).toBe('G')
      raw.write(Buffer.concat([frame('d', Buffer.from('1\tone\n2\ttwo\n')), frame('d', Buffer.from('3\tthree\n')), frame('c')]))
      const reply = await raw.until('Z')
      expect(reply.map((m) => m.type)).toEqual(['C', 'Z'])
      expect(reply[0]!.body.toString('utf8')).toBe('COPY 3\u0000')
      const { rows } = await served.db.query<{ id: number; name: string }>('select id, name from copied where id <= 3 order by id')
      expect(rows).toEqual([
        { id: 1, name: 'one' },
        { id: 2, name: 'two' },
        { id: 3, name: 'three' },
      ])
    })
  })

  it('sends rows with COPY TO STDOUT as CopyOutResponse, CopyData and CopyDone', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame(`copy (select * from (values (1, 'one'), (2, 'two')) as v (id, name) order by id) to stdout`))
      const reply = await raw.until('Z')
      expect(reply.map((m) => m.type)).toEqual(['H', 'd', 'd', 'c', 'C', 'Z'])
      expect(reply.filter((m) => m.type === 'd').map((m) => m.body.toString('utf8'))).toEqual(['1\tone\n', '2\ttwo\n'])
    })
  })

  it('aborts COPY FROM STDIN on CopyFail and leaves the table unchanged', async () => {
    const before = (await served.db.query<{ n: number }>('select count(*)::int as n from copied')).rows[0]!.n
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame('copy copied from stdin'))
      expect((await raw.next())?.type).toBe('G')
      raw.write(Buffer.concat([frame('d', Buffer.from('100\thundred\n')), frame('f', cstr('client gave up'))]))
      const reply = await raw.until('Z')
      expect(reply.map((m) => m.type)).toEqual(['E', 'Z'])
      expect(errorFields(reply[0]!.body).C).toBe('57014')
      expect(reply[1]!.body.toString('latin1')).toBe('I')
      raw.write(queryFrame('select 1'))
      expect((await raw.until('Z')).map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
    })
    expect((await served.db.query<{ n: number }>('select count(*)::int as n from copied')).rows[0]!.n).toBe(before)
  })

  it('loads rows with COPY FROM STDIN preceded by a block comment, as psql sends it', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame('/* load two rows */ copy copied from stdin'))
      expect((await raw.next())?.type).toBe('G')
      raw.write(Buffer.concat([frame('d', Buffer.from('10\tten\n11\televen\n')), frame('c')]))
      const reply = await raw.until('Z')
      expect(reply.map((m) => m.type)).toEqual(['C', 'Z'])
      expect(reply[0]!.body.toString('utf8')).toBe('COPY 2\u0000')
    })
    expect((await served.db.query('select count(*)::int as n from copied where id in (10, 11)')).rows).toEqual([{ n: 2 }])
  })

  it('reports COPY FROM STDIN into a missing table at once, without asking for data, and the connection stays usable', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(queryFrame('copy no_such_table from stdin'))
      const reply = await raw.until('Z')
      expect(reply.map((m) => m.type)).toEqual(['E', 'Z'])
      expect(errorFields(reply[0]!.body).C).toBe('42P01')
      raw.write(queryFrame('select 1'))
      expect((await raw.until('Z')).map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
    })
  })

  it('answers 50 simple queries sent in one write, in order', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(Buffer.concat(Array.from({ length: 50 }, (_, i) => queryFrame(`select ${i} as i`))))
      const values: string[] = []
      for (let i = 0; i < 50; i++) {
        const reply = await raw.until('Z')
        expect(reply.map((m) => m.type)).toEqual(['T', 'D', 'C', 'Z'])
        const data = reply[1]!.body
        // DataRow: int16 column count, int32 length, value.
        values.push(data.subarray(6, 6 + data.readInt32BE(2)).toString('utf8'))
      }
      expect(values).toEqual(Array.from({ length: 50 }, (_, i) => String(i)))
    })
  })
})

describe('postgres.js', () => {
  const served = useServedDatabase()
  let sql: postgres.Sql

  beforeAll(async () => {
    sql = postgres(served.url, { max: 4, connect_timeout: 20, idle_timeout: 0, onnotice: () => {} })
    await sql`create table accounts (id int primary key, balance int not null)`
  })

  afterAll(async () => {
    await sql?.end({ timeout: 5 })
  })

  it('runs parameterized queries as named prepared statements', async () => {
    const first = await sql`select ${20}::int + ${22}::int as sum_of_two`
    const second = await sql`select ${1}::int + ${2}::int as sum_of_two`
    expect([first[0]!.sum_of_two, second[0]!.sum_of_two]).toEqual([42, 3])
    const prepared = await served.db.query<{ n: number }>(
      "select count(*)::int as n from pg_prepared_statements where statement like '%as sum_of_two%'",
    )
    expect(prepared.rows[0]!.n).toBeGreaterThanOrEqual(1)
  })

  it('commits a sql.begin transaction', async () => {
    const result = await sql.begin(async (tx) => {
      await tx`insert into accounts values (1, 100), (2, 50)`
      await tx`update accounts set balance = balance - 30 where id = 1`
      await tx`update accounts set balance = balance + 30 where id = 2`
      return tx`select sum(balance)::int as total from accounts`
    })
    expect(result[0]!.total).toBe(150)
    const { rows } = await served.db.query('select id, balance from accounts order by id')
    expect(rows).toEqual([
      { id: 1, balance: 70 },
      { id: 2, balance: 80 },
    ])
  })

  it('rolls a sql.begin transaction back when its callback throws', async () => {
    await expect(
      sql.begin(async (tx) => {
        await tx`insert into accounts values (3, 1)`
        throw new Error('give up')
      }),
    ).rejects.toThrow('give up')
    const { rows } = await served.db.query('select count(*)::int as n from accounts where id = 3')
    expect(rows).toEqual([{ n: 0 }])
  })

  it('fails only the one bad query among 30 pipelined on one connection', async () => {
    const single = postgres(served.url, { max: 1, connect_timeout: 20, onnotice: () => {} })
    try {
      const settled = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) => single`select 100 / ${i === 17 ? 0 : 1}::int + ${i}::int as v`),
      )
      const summary = settled.map((r) => (r.status === 'fulfilled' ? r.value[0]!.v : (r.reason as { code?: string }).code))
      expect(summary).toEqual(Array.from({ length: 30 }, (_, i) => (i === 17 ? '22012' : 100 + i)))
    } finally {
      await single.end({ timeout: 5 })
    }
  })

  it('answers 100 concurrent queries over 4 connections correctly', async () => {
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => sql`select ${i}::int * ${i}::int as square, ${`v${i}`}::text as tag`),
    )
    expect(results.map((r) => [r[0]!.square, r[0]!.tag])).toEqual(Array.from({ length: 100 }, (_, i) => [i * i, `v${i}`]))
    expect(served.server.connections).toBeGreaterThan(1)
  })
})

describe('psql', () => {
  const served = useServedDatabase()
  let dir: string

  beforeAll(() => {
    dir = tempDir('pgwasm-psql-')
  })

  it.skipIf(!hasPsql)('runs a script with \\copy from inline data and COPY TO STDOUT [needs psql]', async () => {
    const script = join(dir, 'script.sql')
    writeFileSync(
      script,
      [
        'create table items (id int primary key, name text);',
        "insert into items values (1, 'one'), (2, 'two');",
        '\\copy items from stdin',
        '3\tthree',
        '4\tfour',
        '\\.',
        'copy (select * from items order by id) to stdout;',
        "select count(*) as n, string_agg(name, ',' order by id) as names from items;",
        '',
      ].join('\n'),
    )
    const result = await run('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-f', script, served.url], {
      timeoutMs: 60_000,
      env: libpqEnv(),
    })
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(result.stdout).toBe('1\tone\n2\ttwo\n3\tthree\n4\tfour\n4|one,two,three,four\n')
  })

  it.skipIf(!hasPsql)('stops at the first error of a script with ON_ERROR_STOP and exits 3 [needs psql]', async () => {
    const script = join(dir, 'failing.sql')
    writeFileSync(script, 'select 1;\nselect * from missing_table;\nselect 2;\n')
    const result = await run('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-f', script, served.url], {
      timeoutMs: 60_000,
      env: libpqEnv(),
    })
    expect(result.code).toBe(3)
    expect(result.stdout).toBe('1\n')
    expect(result.stderr).toContain('relation "missing_table" does not exist')
  })
})

describe('pgbench', () => {
  const served = useServedDatabase()

  it.skipIf(!hasPgbench)(
    'initializes scale 1 and runs 8 clients x 200 transactions with no failure and consistent balances [needs pgbench]',
    { timeout: 300_000 },
    async () => {
      const init = await run('pgbench', ['-i', '-s', '1', served.url], { timeoutMs: 240_000, env: libpqEnv() })
      expect(init.code, init.stderr).toBe(0)
      expect((await served.db.query('select count(*)::int as n from pgbench_accounts')).rows).toEqual([{ n: 100_000 }])

      const bench = await run('pgbench', ['-c', '8', '-t', '200', '-n', served.url], { timeoutMs: 240_000, env: libpqEnv() })
      expect(bench.code, `${bench.stdout}\n${bench.stderr}`).toBe(0)
      expect(bench.stdout).toMatch(/number of transactions actually processed: 1600\/1600/)
      const failed = /number of failed transactions: (\d+)/.exec(bench.stdout)
      if (failed) expect(failed[1]).toBe('0')

      const { rows } = await served.db.query<{ branches: string; tellers: string; accounts: string; history: number }>(
        `select (select sum(bbalance) from pgbench_branches)::text as branches,
                (select sum(tbalance) from pgbench_tellers)::text as tellers,
                (select sum(abalance) from pgbench_accounts)::text as accounts,
                (select count(*)::int from pgbench_history) as history`,
      )
      expect(rows[0]!.history).toBe(1600)
      expect(rows[0]!.tellers).toBe(rows[0]!.branches)
      expect(rows[0]!.accounts).toBe(rows[0]!.branches)
    },
  )
})

describe('Unix socket', () => {
  const database = useDatabase()
  let server: PGliteServer
  let dir: string

  beforeAll(async () => {
    dir = tempDir('pgwasm-sock-')
    server = new PGliteServer({ db: database.db, path: join(dir, '.s.PGSQL.5432') })
    await server.start()
  })

  afterAll(async () => {
    await server?.stop()
  })

  it('creates the socket file owner-only (mode 0600)', () => {
    const stat = statSync(join(dir, '.s.PGSQL.5432'))
    expect(stat.isSocket()).toBe(true)
    expect(stat.mode & 0o777).toBe(0o600)
  })

  it('serves a pg client that names the socket directory as host', async () => {
    const client = new pg.Client({ host: dir, port: 5432, user: 'postgres', database: 'postgres' })
    try {
      await client.connect()
      const { rows } = await client.query('select $1::text as via', ['unix'])
      expect(rows).toEqual([{ via: 'unix' }])
    } finally {
      await endQuietly(client)
    }
  })

  it('serves a pg client given the server connection string', async () => {
    const client = new pg.Client({ connectionString: server.connectionString })
    try {
      await client.connect()
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }])
    } finally {
      await endQuietly(client)
    }
  })

  it('gives a connection string that reaches a socket named for a port other than 5432', async () => {
    // Alone in its directory: a client that looked for port 5432 there finds nothing.
    const otherDir = tempDir('pgwasm-sock6543-')
    const other = new PGliteServer({ db: database.db, path: join(otherDir, '.s.PGSQL.6543') })
    await other.start()
    const client = new pg.Client({ connectionString: other.connectionString })
    client.on('error', () => {})
    try {
      await client.connect()
      expect((await client.query('select 6543 as port')).rows).toEqual([{ port: 6543 }])
    } finally {
      await endQuietly(client)
      await other.stop()
    }
  })

  it('removes the socket file on stop and can start again on the same path', async () => {
    const path = join(dir, 'again.sock')
    const first = new PGliteServer({ db: database.db, path })
    await first.start()
    await first.stop()
    expect(() => statSync(path)).toThrow()
    const second = new PGliteServer({ db: database.db, path })
    await second.start()
    try {
      expect(statSync(path).isSocket()).toBe(true)
    } finally {
      await second.stop()
    }
  })

  it('refuses a socket path another live server is using', async () => {
    await expect(new PGliteServer({ db: database.db, path: join(dir, '.s.PGSQL.5432') }).start()).rejects.toThrow(/already in use/)
  })

  it('creates a missing socket folder (owner-only), and names a path it cannot use', async () => {
    const nested = join(dir, 'run', 'pgwasm', '.s.PGSQL.5433')
    const third = new PGliteServer({ db: database.db, path: nested })
    await third.start()
    try {
      expect(statSync(nested).isSocket()).toBe(true)
      expect(statSync(join(dir, 'run', 'pgwasm')).mode & 0o777).toBe(0o700)
      const client = new pg.Client({ host: join(dir, 'run', 'pgwasm'), port: 5433, user: 'postgres', database: 'postgres' })
      await client.connect()
      expect((await client.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
      await client.end()
    } finally {
      await third.stop()
    }
    writeFileSync(join(dir, 'a-file'), '')
    await expect(new PGliteServer({ db: database.db, path: join(dir, 'a-file', '.s.PGSQL.5432') }).start()).rejects.toThrow(/a-file is not a folder/)
  })
})

