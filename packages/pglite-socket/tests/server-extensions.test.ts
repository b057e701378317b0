import { rmSync } from 'node:fs'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { HOST } from '@pgwasm/test-support/net'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { Cli, endQuietly, runCli } from './helpers.js'

/*
 * pgwasm-server as a PostgreSQL server with contrib installed: every bundled
 * contrib module and pgvector can be created by any client, in memory and
 * in a directory a new server opens again; and two-phase commit works.
 */

const started: Cli[] = []
const dirs: string[] = []

afterAll(() => {
  for (const cli of started) cli.kill()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

async function serve(args: string[]): Promise<{ cli: Cli; connect: (database?: string) => Promise<pg.Client> }> {
  const cli = new Cli(['--port', '0', ...args])
  started.push(cli)
  const url = (await cli.waitFor(/serving .* at (postgresql:\/\/\S+)/))[1]!
  const port = Number(new URL(url).port)
  const clients: pg.Client[] = []
  return {
    cli,
    connect: async (database = 'postgres') => {
      const client = new pg.Client({ host: HOST, port, user: 'postgres', database })
      client.on('error', () => {})
      await client.connect()
      clients.push(client)
      return client
    },
  }
}

async function stop(cli: Cli): Promise<void> {
  cli.child.kill('SIGTERM')
  await cli.exited
}

const planOf = async (client: pg.Client, sql: string): Promise<string> =>
  (await client.query<{ 'QUERY PLAN': string }>(`explain ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n')

describe('CREATE EXTENSION through pgwasm-server', () => {
  it('creates and uses contrib modules and pgvector in memory, with the index scans they provide', async () => {
    const { cli, connect } = await serve(['--db', 'memory://'])
    const client = await connect()
    try {
      const { rows } = await client.query<{ name: string }>('select name from pg_available_extensions')
      const available = rows.map((r) => r.name)
      for (const name of ['hstore', 'pg_trgm', 'citext', 'pgcrypto', 'vector', 'uuid-ossp', 'btree_gist']) expect(available).toContain(name)
      await client.query('create extension hstore; create extension pg_trgm; create extension citext; create extension pgcrypto; create extension vector')
      expect((await client.query(`select ('a=>1'::hstore) -> 'a' as v, 'ABC'::citext = 'abc' as same, encode(digest('abc', 'sha256'), 'hex') as h`)).rows).toEqual([
        { v: '1', same: true, h: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' },
      ])
      await client.query(`create table docs (id int primary key, body text, embedding vector(3));
        insert into docs select g, 'document ' || g, array[g, g * 2, g % 7]::vector from generate_series(1, 3000) g;
        create index docs_trgm on docs using gin (body gin_trgm_ops);
        create index docs_hnsw on docs using hnsw (embedding vector_l2_ops);
        analyze docs`)
      await client.query('set enable_seqscan = off')
      expect(await planOf(client, `select id from docs where body like '%ment 299%'`)).toContain('docs_trgm')
      expect(await planOf(client, `select id from docs order by embedding <-> '[10, 20, 3]' limit 3`)).toContain('docs_hnsw')
      expect((await client.query(`select id from docs order by embedding <-> '[10, 20, 3]' limit 1`)).rows).toEqual([{ id: 10 }])
    } finally {
      await endQuietly(client)
      await stop(cli)
    }
  }, 180_000)

  it('creates every extension pg_available_extensions lists, each then listed in pg_extension', async () => {
    const { cli, connect } = await serve(['--db', 'memory://'])
    const client = await connect()
    try {
      const { rows } = await client.query<{ name: string }>('select name from pg_available_extensions where installed_version is null order by name')
      expect(rows.length).toBeGreaterThan(35)
      const failed: string[] = []
      for (const { name } of rows) {
        await client.query(`create extension if not exists "${name}" cascade`).catch((err: Error) => failed.push(`${name}: ${err.message}`))
      }
      expect(failed).toEqual([])
      const installed = await client.query<{ n: number }>('select count(*)::int as n from pg_extension')
      expect(installed.rows[0]!.n).toBeGreaterThanOrEqual(rows.length)
    } finally {
      await endQuietly(client)
      await stop(cli)
    }
  }, 180_000)

  it('opens a directory whose database has extensions with a new server, and a new database by name gets them too', async () => {
    const dir = tempDir()
    dirs.push(dir)
    const first = await serve(['--db', dir, '--create-database-on-connect'])
    let client = await first.connect()
    await client.query(`create extension pg_trgm; create table words (w text);
      insert into words select 'word' || g from generate_series(1, 2000) g;
      create index words_trgm on words using gin (w gin_trgm_ops)`)
    await endQuietly(client)
    const other = await first.connect('another')
    await other.query('create extension hstore')
    expect((await other.query(`select ('k=>v'::hstore) -> 'k' as v`)).rows).toEqual([{ v: 'v' }])
    await endQuietly(other)
    await stop(first.cli)
    const second = await serve(['--db', dir])
    client = await second.connect()
    try {
      await client.query('set enable_seqscan = off')
      expect(await planOf(client, `select w from words where w like '%rd1999%'`)).toContain('words_trgm')
      expect((await client.query(`select w from words where w like '%rd1999%'`)).rows).toEqual([{ w: 'word1999' }])
      expect((await client.query(`select similarity('word', 'words') > 0.5 as close`)).rows).toEqual([{ close: true }])
    } finally {
      await endQuietly(client)
      await stop(second.cli)
    }
  }, 180_000)

  it('offers only what --extensions names, and refuses an unknown name at start', async () => {
    const { cli, connect } = await serve(['--extensions', 'hstore,uuid-ossp'])
    const client = await connect()
    try {
      await client.query('create extension hstore; create extension "uuid-ossp"')
      await expect(client.query('create extension pg_trgm')).rejects.toThrow(/extension "pg_trgm" is not available/)
    } finally {
      await endQuietly(client)
      await stop(cli)
    }
    const bad = await runCli(['--port', '0', '--extensions', 'hstore,nosuchthing'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('--extensions: unknown extension "nosuchthing"')
  }, 180_000)
})

describe('two-phase commit through pgwasm-server', () => {
  it('commits a transaction one client prepared from another client, and keeps one prepared across a restart on a directory', async () => {
    const dir = tempDir()
    dirs.push(dir)
    const first = await serve(['--db', dir])
    const a = await first.connect()
    const b = await first.connect()
    await a.query('create table ledger (id int primary key, note text)')
    await a.query(`begin; insert into ledger values (1, 'one'); prepare transaction 'tx-one'`)
    await a.query(`begin; insert into ledger values (2, 'two'); prepare transaction 'tx-two'`)
    // Prepared, not yet visible; another client ends it.
    expect((await b.query('select count(*)::int as n from ledger')).rows).toEqual([{ n: 0 }])
    expect((await b.query('select gid from pg_prepared_xacts order by gid')).rows).toEqual([{ gid: 'tx-one' }, { gid: 'tx-two' }])
    await b.query(`commit prepared 'tx-one'`)
    expect((await a.query('select note from ledger')).rows).toEqual([{ note: 'one' }])
    await endQuietly(a)
    await endQuietly(b)
    await stop(first.cli)
    const second = await serve(['--db', dir])
    const c = await second.connect()
    try {
      expect((await c.query('select gid from pg_prepared_xacts')).rows).toEqual([{ gid: 'tx-two' }])
      await c.query(`commit prepared 'tx-two'`)
      expect((await c.query('select id from ledger order by id')).rows).toEqual([{ id: 1 }, { id: 2 }])
      await c.query(`begin; insert into ledger values (3, 'three'); prepare transaction 'tx-three'`)
      await c.query(`rollback prepared 'tx-three'`)
      expect((await c.query('select count(*)::int as n from ledger')).rows).toEqual([{ n: 2 }])
    } finally {
      await endQuietly(c)
      await stop(second.cli)
    }
  }, 180_000)

  it('refuses PREPARE TRANSACTION as PostgreSQL does with --max-prepared-transactions 0', async () => {
    const { cli, connect } = await serve(['--max-prepared-transactions', '0'])
    const client = await connect()
    try {
      await client.query('begin')
      await expect(client.query(`prepare transaction 'x'`)).rejects.toMatchObject({ code: '55000', message: 'prepared transactions are disabled' })
    } finally {
      await endQuietly(client)
      await stop(cli)
    }
  }, 120_000)
})
