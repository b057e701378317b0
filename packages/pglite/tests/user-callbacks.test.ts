import { describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'

// Code of the caller's that runs while the engine writes its output (row
// parsers) must not end the engine when it throws.
describe('a parser that throws', () => {
  it('rejects that call with its error; the instance, its statements and transactions go on', async () => {
    const db = await PGlite.create()
    const boom = new Error('bad parser')
    const bad = {
      parsers: {
        23: () => {
          throw boom
        },
      },
    }
    await db.exec('create table t (x int); insert into t values (1)')
    for (let i = 0; i < 3; i++) {
      await expect(db.query('select $1::int4 as x', [i], bad)).rejects.toBe(boom)
      expect((await db.query('select $1::int4 as x', [i])).rows).toEqual([{ x: i }])
    }
    await expect(db.exec('select x from t', bad)).rejects.toBe(boom)
    await db.transaction(async (tx) => {
      await expect(tx.query('select x from t', [], bad)).rejects.toBe(boom)
      await tx.query('insert into t values (2)')
    })
    expect(db.closed).toBe(false)
    expect((await db.query('select count(*)::int as n from t')).rows).toEqual([{ n: 2 }])
    await db.close()
  })
})

describe('an onRawData callback that throws', () => {
  it('rejects that call with its error; the instance goes on', async () => {
    const db = await PGlite.create()
    const boom = new Error('bad callback')
    const query = new Uint8Array([0x51, 0, 0, 0, 13, ...new TextEncoder().encode('select 1'), 0])
    await expect(
      db.execProtocolRawStream(query, {
        onRawData: () => {
          throw boom
        },
      }),
    ).rejects.toBe(boom)
    expect(db.closed).toBe(false)
    expect((await db.query('select 2 as n')).rows).toEqual([{ n: 2 }])
    await db.close()
  })
})
