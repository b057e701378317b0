import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { queryFrame as queryMessage } from '@pgwasm/test-support/frontend'
import { rejection } from './helpers.js'
import { ClosedError, DatabaseError, PGlite, ProtocolError } from '../src/index.js'

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
  await db.exec(`
    create table e_unique (id int constraint e_unique_pk primary key, name text not null);
    insert into e_unique values (1, 'one');
  `)
})

afterAll(async () => {
  await db?.close()
})

async function expectUsable(instance: PGlite = db): Promise<void> {
  const { rows } = await instance.query('select $1::int + 1 as n', [41])
  expect(rows).toEqual([{ n: 42 }])
}

describe('DatabaseError', () => {
  it('rejects a syntax error with code 42601 and its position', async () => {
    const error = await rejection(db.query('SELEKT 1'))
    expect(error).toBeInstanceOf(DatabaseError)
    expect(error).toBeInstanceOf(Error)
    expect(error).toMatchObject({ name: 'DatabaseError', code: '42601', severity: 'ERROR', position: '1' })
    expect((error as DatabaseError).message).toContain('syntax error')
  })

  it('reports the position of a syntax error later in the statement', async () => {
    const error = (await rejection(db.query('select 1 +'))) as DatabaseError
    expect(error.code).toBe('42601')
    expect(error.position).toBe('11')
  })

  it('rejects a syntax error from exec with code 42601', async () => {
    const error = await rejection(db.exec('select 1; SELEKT 2'))
    expect(error).toBeInstanceOf(DatabaseError)
    expect((error as DatabaseError).code).toBe('42601')
  })

  it('reports code 23505, constraint, table, schema and detail for a unique violation', async () => {
    const error = await rejection(db.query('insert into e_unique values ($1, $2)', [1, 'again']))
    expect(error).toBeInstanceOf(DatabaseError)
    expect(error).toMatchObject({
      code: '23505',
      constraint: 'e_unique_pk',
      table: 'e_unique',
      schema: 'public',
      detail: 'Key (id)=(1) already exists.',
    })
  })

  it('reports code 23502 and the column for a not-null violation', async () => {
    const error = await rejection(db.query('insert into e_unique values ($1, $2)', [2, null]))
    expect(error).toMatchObject({ code: '23502', column: 'name', table: 'e_unique', schema: 'public' })
  })

  it('rejects a query with more parameters than placeholders with DatabaseError 08P01', async () => {
    const error = await rejection(db.query('select $1::int as a', [1, 2]))
    expect(error).toBeInstanceOf(DatabaseError)
    expect((error as DatabaseError).code).toBe('08P01')
    await expectUsable()
  })

  it('rejects a query with fewer parameters than placeholders with DatabaseError 08P01', async () => {
    const error = await rejection(db.query('select $1::int as a, $2::int as b', [1]))
    expect(error).toBeInstanceOf(DatabaseError)
    expect((error as DatabaseError).code).toBe('08P01')
    await expectUsable()
  })

  it('rejects the wrong parameter count of an already cached statement and keeps the statement usable', async () => {
    const text = 'select $1::int * 2 as doubled'
    expect((await db.query(text, [2])).rows).toEqual([{ doubled: 4 }])
    const error = await rejection(db.query(text, [2, 3]))
    expect((error as DatabaseError).code).toBe('08P01')
    expect((await db.query(text, [5])).rows).toEqual([{ doubled: 10 }])
  })

  it('rejects an unknown parameter type with code 42704', async () => {
    const error = await rejection(db.query('select $1::nosuchtype', ['x']))
    expect(error).toBeInstanceOf(DatabaseError)
    expect((error as DatabaseError).code).toBe('42704')
    await expectUsable()
  })

  it('rejects a missing table with code 42P01', async () => {
    const error = await rejection(db.query('select * from e_no_such_table'))
    expect((error as DatabaseError).code).toBe('42P01')
  })

  it('rejects invalid input for a parameter type with code 22P02', async () => {
    const error = await rejection(db.query('select $1::int as n', ['not a number']))
    expect((error as DatabaseError).code).toBe('22P02')
    await expectUsable()
  })

  it('sets err.query and err.params for a failed query', async () => {
    const sql = 'select $1::int / $2::int as q'
    const error = (await rejection(db.query(sql, [5, 0]))) as DatabaseError
    expect(error.code).toBe('22012')
    expect(error.query).toBe(sql)
    expect(error.params).toEqual([5, 0])
  })

  it('sets err.query for a failed exec', async () => {
    const sql = 'select 1/0'
    const error = (await rejection(db.exec(sql))) as DatabaseError
    expect(error.code).toBe('22012')
    expect(error.query).toBe(sql)
    expect(error.params).toBeUndefined()
  })

  it('runs a good query after an error', async () => {
    await rejection(db.query('select * from e_missing'))
    await expectUsable()
  })

  it('runs a good query after an error inside a transaction', async () => {
    const error = await rejection(
      db.transaction(async (tx) => {
        await tx.query('insert into e_unique values (1, $1)', ['dup'])
      }),
    )
    expect((error as DatabaseError).code).toBe('23505')
    await expectUsable()
    expect(db.isInTransaction()).toBe(false)
  })

  it('runs a good query after an error inside an explicit BEGIN block rolled back by exec', async () => {
    await db.exec('BEGIN')
    await rejection(db.query('select 1/0'))
    const aborted = await rejection(db.query('select 1'))
    expect((aborted as DatabaseError).code).toBe('25P02')
    await db.exec('ROLLBACK')
    await expectUsable()
  })
})

describe('execProtocolRaw with malformed input', () => {
  it('runs a well-formed Query message and returns the backend bytes', async () => {
    const bytes = await db.execProtocolRaw(queryMessage('select 1'))
    expect(bytes).toBeInstanceOf(Uint8Array)
    expect(bytes[bytes.length - 6]).toBe(0x5a) // ReadyForQuery 'Z'
  })

  it('rejects a frame whose length field is below 4 with ProtocolError', async () => {
    const error = await rejection(db.execProtocolRaw(new Uint8Array([0x51, 0, 0, 0, 3])))
    expect(error).toBeInstanceOf(ProtocolError)
    expect((error as ProtocolError).code).toBe('BAD_FRAME')
    await expectUsable()
  })

  it('rejects a truncated frame with ProtocolError', async () => {
    const full = queryMessage('select 12345')
    const error = await rejection(db.execProtocolRaw(full.subarray(0, full.length - 4)))
    expect(error).toBeInstanceOf(ProtocolError)
    expect((error as ProtocolError).code).toBe('BAD_FRAME')
    await expectUsable()
  })

  it('rejects a truncated frame header with ProtocolError', async () => {
    const error = await rejection(db.execProtocolRaw(new Uint8Array([0x51, 0, 0])))
    expect(error).toBeInstanceOf(ProtocolError)
    await expectUsable()
  })

  it('rejects an unknown message type byte 0x01 with ProtocolError', async () => {
    const error = await rejection(db.execProtocolRaw(new Uint8Array([0x01, 0, 0, 0, 4])))
    expect(error).toBeInstanceOf(ProtocolError)
    expect((error as ProtocolError).code).toBe('UNKNOWN_MESSAGE')
    await expectUsable()
  })

  it('rejects a good frame followed by a malformed one without running the good one', async () => {
    await db.exec('create table e_raw (id int)')
    const good = queryMessage('insert into e_raw values (1)')
    const message = new Uint8Array([...good, 0x01, 0, 0, 0, 4])
    const error = await rejection(db.execProtocolRaw(message))
    expect(error).toBeInstanceOf(ProtocolError)
    const { rows } = await db.query('select count(*)::int as n from e_raw')
    expect(rows).toEqual([{ n: 0 }])
  })
})

describe('close()', () => {
  // Each test closes an instance of its own: none depends on another having
  // run (or not) before it.
  it('sets closed to true', async () => {
    const closing = await PGlite.create()
    expect(closing.closed).toBe(false)
    await closing.close()
    expect(closing.closed).toBe(true)
    expect(closing.ready).toBe(false)
  })

  it('makes a later query reject with ClosedError', async () => {
    const closing = await PGlite.create()
    await closing.close()
    const error = await rejection(closing.query('select 1'))
    expect(error).toBeInstanceOf(ClosedError)
    expect((error as ClosedError).code).toBe('CLOSED')
  })

  it('makes a later exec, transaction and listen reject with ClosedError', async () => {
    const closing = await PGlite.create()
    await closing.close()
    await expect(closing.exec('select 1')).rejects.toBeInstanceOf(ClosedError)
    await expect(closing.transaction(async () => 1)).rejects.toBeInstanceOf(ClosedError)
    await expect(closing.listen('c', () => {})).rejects.toBeInstanceOf(ClosedError)
  })

  it('resolves a second close()', async () => {
    const closing = await PGlite.create()
    await closing.close()
    await expect(closing.close()).resolves.toBeUndefined()
  })

  it('lets queries queued before close() finish first', async () => {
    const closingBusy = await PGlite.create()
    const queued = closingBusy.query('select 7 as n')
    const closed = closingBusy.close()
    expect((await queued).rows).toEqual([{ n: 7 }])
    await closed
    expect(closingBusy.closed).toBe(true)
  })
})
