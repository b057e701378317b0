import { afterAll, describe, expect, it } from 'vitest'
import { serialize } from 'pg-protocol'
import { frameTypes } from '@pgwasm/test-support/backend'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { concat } from './helpers.js'
import { PGlite } from '../src/index.js'

/** ~11 MB of WAL: 10,000 rows of 1 kB. */
const WRITE_SQL = "insert into w select g, repeat('x', 1000) from generate_series(1, 10000) g"
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function walSegments(db: PGlite): Promise<number> {
  const { rows } = await db.query<{ n: number }>("select count(*)::int as n from pg_ls_waldir() where name ~ '^[0-9A-F]{24}$'")
  return rows[0]!.n
}

async function lastCheckpoint(db: PGlite): Promise<string> {
  return (await db.query<{ lsn: string }>('select checkpoint_lsn::text as lsn from pg_control_checkpoint()')).rows[0]!.lsn
}

/** Writes ~110 MB of WAL per round in 10 requests (a table kept small by delete and vacuum), then lets the host look at pg_wal. */
async function writeMuchWal(db: PGlite, rounds: number): Promise<void> {
  await db.exec('create table if not exists w (id int, v text)')
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < 10; i++) await db.query(WRITE_SQL)
    await db.query('delete from w')
    await db.query('vacuum w')
  }
  await sleep(250)
  await db.query('select 1')
}

// Postgres in single-user mode never checkpoints on its own: every WAL segment since the open stayed.
describe('WAL of a long session', () => {
  const open: PGlite[] = []
  afterAll(async () => {
    for (const db of open) await db.close()
  })

  it('stays bounded in memory: checkpoints run between requests and the old segments go', async () => {
    const db = await PGlite.create()
    open.push(db)
    const before = await lastCheckpoint(db)
    await writeMuchWal(db, 2)
    expect(await lastCheckpoint(db)).not.toBe(before)
    // ~14 segments of 16 MB were written; max_wal_size (64 MB) keeps four, plus what came after the last checkpoint.
    expect(await walSegments(db)).toBeLessThanOrEqual(8)
    expect((await db.query<{ n: number }>('select count(*)::int as n from w')).rows[0]!.n).toBe(0)
  }, 120_000)

  it('goes on when SQL prepared a statement under the name the checkpoint uses', async () => {
    const db = await PGlite.create()
    open.push(db)
    // An attack: a Parse of a name that exists fails, so this would stop every checkpoint.
    await db.exec('prepare pgwasm_checkpoint as select 1')
    const before = await lastCheckpoint(db)
    await writeMuchWal(db, 2)
    expect(await lastCheckpoint(db)).not.toBe(before)
    expect(await walSegments(db)).toBeLessThanOrEqual(8)
  }, 120_000)

  it('gives a role without the right to checkpoint no error from the checkpoints it cannot run, and they run again once it has it', async () => {
    const db = await PGlite.create()
    open.push(db)
    await db.exec('create role plain; grant create on schema public to plain')
    const before = await lastCheckpoint(db)
    await db.exec('set role plain')
    // Every request succeeds; the checkpoints after them fail unseen.
    await writeMuchWal(db, 2)
    await db.exec('reset role')
    expect(await lastCheckpoint(db)).toBe(before)
    expect(await walSegments(db)).toBeGreaterThan(8)
    await writeMuchWal(db, 1)
    expect(await lastCheckpoint(db)).not.toBe(before)
    expect(await walSegments(db)).toBeLessThanOrEqual(8)
  }, 120_000)

  it('is checkpointed on a directory too, and the data is there after a reopen', async () => {
    const dir = tempDir('pgwasm-wal-')
    const db = await PGlite.create(dir)
    const before = await lastCheckpoint(db)
    // A directory checkpoints after 16 new segments (256 MB): ~330 MB of WAL.
    await writeMuchWal(db, 3)
    expect(await lastCheckpoint(db)).not.toBe(before)
    await db.query(WRITE_SQL)
    await db.close()
    const again = await PGlite.create(dir)
    open.push(again)
    expect((await again.query<{ n: number }>('select count(*)::int as n from w')).rows[0]!.n).toBe(10_000)
  }, 120_000)

  it('leaves the session as it was: the unnamed statement still binds, and an open transaction is not checkpointed into', async () => {
    const db = await PGlite.create()
    open.push(db)
    await db.exec('create table w (id int, v text)')
    expect(frameTypes(await db.execProtocolRaw(concat([serialize.parse({ text: 'select 42 as answer' }), serialize.sync()])))).toBe('1Z')
    // Writes through a named statement, which leave the unnamed one alone.
    await db.execProtocolRaw(concat([serialize.parse({ name: 'write', text: WRITE_SQL }), serialize.sync()]))
    const write = concat([serialize.bind({ statement: 'write' }), serialize.execute({}), serialize.sync()])
    const before = await lastCheckpointRaw(db)
    for (let i = 0; i < 10; i++) expect(frameTypes(await db.execProtocolRaw(write))).toBe('2CZ')
    await sleep(250)
    expect(frameTypes(await db.execProtocolRaw(write))).toBe('2CZ')
    expect(await lastCheckpointRaw(db)).not.toBe(before)
    const reply = await db.execProtocolRaw(concat([serialize.bind({}), serialize.execute({}), serialize.sync()]))
    expect(frameTypes(reply)).toBe('2DCZ')
    expect(Buffer.from(reply).includes(Buffer.from('42'))).toBe(true)
    // Inside a transaction block nothing runs between requests: its writes roll back whole.
    await db.exec('begin')
    const inBlock = await lastCheckpointRaw(db)
    for (let i = 0; i < 10; i++) await db.execProtocolRaw(write)
    await sleep(250)
    await db.execProtocolRaw(write)
    expect(await lastCheckpointRaw(db)).toBe(inBlock)
    await db.exec('rollback')
    expect((await db.query<{ n: number }>('select count(*)::int as n from w')).rows[0]!.n).toBe(110_000)
  }, 120_000)
})

let counter = 0

/** The last checkpoint's location, read through a named statement (so the unnamed one stays). */
async function lastCheckpointRaw(db: PGlite): Promise<string> {
  const name = `lsn${counter++}`
  const reply = await db.execProtocolRaw(
    concat([
      serialize.parse({ name, text: 'select checkpoint_lsn::text from pg_control_checkpoint()' }),
      serialize.bind({ statement: name }),
      serialize.execute({}),
      serialize.sync(),
    ]),
  )
  const text = Buffer.from(reply).toString('latin1')
  const match = /[0-9A-F]+\/[0-9A-F]+/.exec(text)
  if (!match) throw new Error(`no LSN in ${frameTypes(reply)}`)
  return match[0]
}
