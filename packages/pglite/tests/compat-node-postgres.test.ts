// `@pgwasm/pglite/node-postgres`: a real `pg` Client and Pool on a PGlite
// instance in the same process, loaded from the built package.
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { createPgConfig, PGlitePgConfig } from '@pgwasm/pglite/node-postgres'

// `pg` is a dependency of the socket package in this workspace, not of this one.
const socketPackage = join(fileURLToPath(import.meta.url), '..', '..', '..', 'pglite-socket', 'package.json')
interface PgQueryable {
  query<R = Record<string, unknown>>(text: string | { text: string; rowMode?: 'array' }, values?: unknown[]): Promise<{ rows: R[] }>
  end(): Promise<void>
}
const pg = createRequire(socketPackage)('pg') as {
  Client: new (config: object) => PgQueryable & { connect(): Promise<void> }
  Pool: new (config: object) => PgQueryable
}

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
  await db.exec('CREATE TABLE np (id int PRIMARY KEY, label text)')
})

afterAll(async () => {
  await db.close()
})

describe('node-postgres on PGlite', () => {
  it('runs simple and parameterized queries on the instance it was given', async () => {
    const client = new pg.Client(createPgConfig(db))
    await client.connect()
    try {
      await client.query('INSERT INTO np VALUES ($1, $2), ($3, $4)', [1, 'one', 2, 'two'])
      expect((await client.query('SELECT label FROM np WHERE id = $1', [2])).rows).toEqual([{ label: 'two' }])
      expect((await client.query({ text: 'SELECT id FROM np WHERE id < 10 ORDER BY id', rowMode: 'array' })).rows).toEqual([[1], [2]])
    } finally {
      await client.end()
    }
    // The instance is the caller's: ending the client leaves it open, with the rows.
    expect(db.closed).toBe(false)
    // (Other tests of this file use ids from 10 up.)
    expect((await db.query('SELECT count(*)::int AS n FROM np WHERE id < 10')).rows).toEqual([{ n: 2 }])
  })

  it('reports a server error with its SQLSTATE and keeps the client usable', async () => {
    const client = new pg.Client(createPgConfig(db))
    await client.connect()
    try {
      await client.query('INSERT INTO np VALUES (10, $1)', ['x'])
      const err = await client.query('INSERT INTO np VALUES (10, $1)', ['dup']).catch((e: unknown) => e)
      expect(err).toMatchObject({ code: '23505', constraint: 'np_pkey' })
      expect((await client.query('SELECT 1 AS ok')).rows).toEqual([{ ok: 1 }])
    } finally {
      await client.end()
    }
  })

  it('commits and rolls back transactions', async () => {
    const client = new pg.Client(createPgConfig(db))
    await client.connect()
    try {
      await client.query('BEGIN')
      await client.query("INSERT INTO np VALUES (20, 'kept')")
      await client.query('COMMIT')
      await client.query('BEGIN')
      await client.query("INSERT INTO np VALUES (21, 'dropped')")
      await client.query('ROLLBACK')
    } finally {
      await client.end()
    }
    expect((await db.query('SELECT id FROM np WHERE id BETWEEN 20 AND 29 ORDER BY id')).rows).toEqual([{ id: 20 }])
  })

  it('serves a Pool from a config that makes its own instance', async () => {
    const config = createPgConfig()
    expect(config).toBeInstanceOf(PGlitePgConfig)
    expect(config.poolSize).toBe(1)
    const pool = new pg.Pool(config)
    try {
      const { rows } = await pool.query<{ v: string }>("SELECT current_setting('server_version_num')::int >= 170000 AS v")
      expect(rows).toEqual([{ v: true }])
    } finally {
      await pool.end()
    }
  })
})
