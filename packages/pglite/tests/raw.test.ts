import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frameTypes } from '@pgwasm/test-support/backend'
import { concat } from './helpers.js'
import { serialize } from 'pg-protocol'
import { PGlite } from '../src/index.js'

describe('raw protocol execs', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec('create table r (id int primary key, v text); insert into r select g, repeat(md5(g::text), 20) from generate_series(1, 200) g')
  })
  afterAll(() => db.close())

  it('hands on exactly the bytes execProtocolRaw returns for the same message', async () => {
    const message = serialize.query('select * from r order by id')
    const whole = await db.execProtocolRaw(message)
    const chunks: Uint8Array[] = []
    await db.execProtocolRawStream(message, { onRawData: (c) => chunks.push(c.slice()) })
    expect(chunks.length).toBeGreaterThan(1)
    expect(Buffer.from(concat(chunks)).equals(Buffer.from(whole))).toBe(true)
    expect(frameTypes(whole)).toMatch(/^TD+CZ$/)
  })

  it('runs an extended-protocol pipeline in one exec', async () => {
    const message = concat([
      serialize.parse({ text: 'select $1::int + 1 as n' }),
      serialize.bind({ values: ['41'] }),
      serialize.describe({ type: 'P' }),
      serialize.execute({}),
      serialize.sync(),
    ])
    const reply = await db.execProtocolRaw(message)
    expect(frameTypes(reply)).toBe('12TDCZ')
  })

  it('keeps no result buffer growing over 10,000 raw-stream execs', async () => {
    const message = serialize.query('select * from r where id < 20')
    let bytes = 0
    const onRawData = (c: Uint8Array): void => {
      bytes += c.length
    }
    await db.execProtocolRawStream(message, { onRawData })
    const before = db._internalStats()
    for (let i = 0; i < 10_000; i++) await db.execProtocolRawStream(message, { onRawData })
    const after = db._internalStats()
    expect(bytes).toBeGreaterThan(10_000 * 1000)
    expect(after.rowsHeld).toBe(0)
    expect(after.scannerBytes).toBe(before.scannerBytes)
    expect(after.rawBufferBytes).toBe(before.rawBufferBytes)
  })

  it('keeps no result buffer growing over 10,000 raw-stream execs while a listener scans for notifications', async () => {
    const off = db.onNotification(() => {})
    try {
      const message = serialize.query('select * from r where id < 20')
      await db.execProtocolRawStream(message, { onRawData: () => {} })
      const before = db._internalStats()
      for (let i = 0; i < 10_000; i++) await db.execProtocolRawStream(message, { onRawData: () => {} })
      const after = db._internalStats()
      expect(after.scannerBytes).toBe(before.scannerBytes)
      expect(after.rawBufferBytes).toBe(before.rawBufferBytes)
    } finally {
      off()
    }
  })

  it('delivers a NOTIFY that arrives during a raw-stream exec to a listener', async () => {
    const received = new Promise<string>((resolve) => {
      void db.listen('raw_chan', resolve)
    })
    // Wait for LISTEN to have run before notifying.
    await db.query('select 1')
    const chunks: Uint8Array[] = []
    await db.execProtocolRawStream(serialize.query("NOTIFY raw_chan, 'from raw'"), {
      onRawData: (c) => chunks.push(c.slice()),
    })
    expect(await received).toBe('from raw')
    // The caller still gets the A frame among its bytes, untouched.
    expect(frameTypes(concat(chunks))).toContain('A')
    await db.unlisten('raw_chan')
  })

  it('delivers a NOTIFY split across output chunks', async () => {
    const payload = 'x'.repeat(7000)
    const got: string[] = []
    const done = new Promise<void>((resolve) => {
      void db.listen('big_chan', (p) => {
        got.push(p)
        if (got.length === 3) resolve()
      })
    })
    await db.query('select 1')
    // Three 7 KB notifications cross the engine's 8 KB send buffer boundaries.
    await db.execProtocolRawStream(serialize.query(`NOTIFY big_chan, '${payload}'; NOTIFY big_chan, '${payload}1'; NOTIFY big_chan, '${payload}2'`), {
      onRawData: () => {},
    })
    await done
    expect(got).toEqual([payload, `${payload}1`, `${payload}2`])
    await db.unlisten('big_chan')
  })

  it('answers a startup packet with authentication, parameters, key data and ReadyForQuery', async () => {
    const other = await PGlite.create()
    try {
      const enc = new TextEncoder()
      const params = enc.encode('user\u0000postgres\u0000database\u0000postgres\u0000\u0000')
      const packet = new Uint8Array(8 + params.length)
      const view = new DataView(packet.buffer)
      view.setInt32(0, packet.length)
      view.setInt32(4, 196608)
      packet.set(params, 8)
      const reply = await other.execProtocolRaw(packet)
      expect(frameTypes(reply)).toMatch(/^RS+KZ$/)
      expect((await other.query<{ n: number }>('select 1 as n')).rows[0]!.n).toBe(1)
    } finally {
      await other.close()
    }
  })

  it('returns decoded pg-protocol messages from execProtocol', async () => {
    const { messages, data } = await db.execProtocol(serialize.query('select 1 as one'))
    expect(messages.map((m) => m.name)).toEqual(['rowDescription', 'dataRow', 'commandComplete', 'readyForQuery'])
    expect(data.length).toBeGreaterThan(0)
  })

  it('throws the ErrorResponse of execProtocol as a DatabaseError and stays usable', async () => {
    await expect(db.execProtocol(serialize.query('select * from missing_table'))).rejects.toMatchObject({
      name: 'DatabaseError',
      code: '42P01',
    })
    const { messages } = await db.execProtocol(serialize.query('select * from missing_table'), { throwOnError: false })
    expect(messages.map((m) => m.name)).toEqual(['error', 'readyForQuery'])
    expect((await db.query('select 2 as n')).rows).toEqual([{ n: 2 }])
  })
})

describe('COPY FROM STDIN without its data', () => {
  it('fails the COPY with an error instead of killing the engine', async () => {
    const db = await PGlite.create()
    try {
      await db.exec('create table c (a int)')
      const reply = await db.execProtocolRaw(serialize.query('COPY c FROM STDIN'))
      expect(frameTypes(reply)).toBe('GEZ')
      await expect(db.exec('COPY c FROM STDIN')).rejects.toMatchObject({ name: 'DatabaseError', code: '57014' })
      const whole = concat([serialize.query('COPY c FROM STDIN'), serialize.copyData(Buffer.from('1\n2\n')), serialize.copyDone()])
      expect(frameTypes(await db.execProtocolRaw(whole))).toBe('GCZ')
      expect((await db.query('select count(*)::int as n from c')).rows).toEqual([{ n: 2 }])
    } finally {
      await db.close()
    }
  })
})

describe('lease', () => {
  it('holds the queue until released so other calls wait', async () => {
    const db = await PGlite.create()
    try {
      const lease = await db.lease()
      lease.execProtocolRawStream(serialize.query('begin; create table l (a int)'), () => {})
      expect(lease.inTransaction).toBe(true)
      let ran = false
      const other = db.query('select count(*)::int as n from pg_class where relname = $1', ['l']).then((r) => {
        ran = true
        return r
      })
      // The query reached the queue and waits there: the lease says so.
      await expect.poll(() => lease.othersWaiting).toBe(true)
      expect(ran).toBe(false)
      lease.execProtocolRawStream(serialize.query('rollback'), () => {})
      lease.release()
      expect((await other).rows).toEqual([{ n: 0 }])
    } finally {
      await db.close()
    }
  })
})

describe('lease.whenOthersWait', () => {
  it('calls back as each caller starts to wait, until the lease is released', async () => {
    const db = await PGlite.create()
    try {
      const lease = await db.lease()
      const seen: boolean[] = []
      lease.whenOthersWait(() => seen.push(lease.othersWaiting))
      const first = db.query('select 1 as n')
      const second = db.query('select 2 as n')
      try {
        await expect.poll(() => seen).toEqual([true, true])
      } finally {
        lease.release()
      }
      expect((await first).rows).toEqual([{ n: 1 }])
      expect((await second).rows).toEqual([{ n: 2 }])
      // Released: the next lease's waiters call nobody back.
      const next = await db.lease()
      const third = db.query('select 3 as n')
      try {
        await expect.poll(() => next.othersWaiting).toBe(true)
        expect(seen).toHaveLength(2)
      } finally {
        next.release()
      }
      expect((await third).rows).toEqual([{ n: 3 }])
    } finally {
      await db.close()
    }
  })
})

describe('lease.transactionBlock', () => {
  it("reads the open block's isolation, access mode, transaction id and savepoints from the engine, as SQL reports them", async () => {
    const db = await PGlite.create()
    try {
      await db.exec('create table tb (a int)')
      const lease = await db.lease()
      try {
        const run = (sql: string): void => lease.execProtocolRawStream(serialize.query(sql), () => {})
        expect(lease.transactionBlock()).toBeUndefined()
        run('begin')
        expect(lease.transactionBlock()).toEqual({ isolation: 'read committed', readOnly: false, deferrable: false, hasXid: false, savepoints: 0, cursors: 0 })
        run('select count(*) from tb')
        expect(lease.transactionBlock()?.hasXid).toBe(false)
        run('savepoint s1; savepoint s2')
        expect(lease.transactionBlock()?.savepoints).toBe(2)
        run('release savepoint s1')
        expect(lease.transactionBlock()?.savepoints).toBe(0)
        // A write, or a row lock, gives the block its transaction id, as pg_current_xact_id_if_assigned() tells.
        run('insert into tb values (1)')
        expect(lease.transactionBlock()?.hasXid).toBe(true)
        run('rollback')
        expect(lease.transactionBlock()).toBeUndefined()
        run('begin isolation level repeatable read, read only, deferrable')
        expect(lease.transactionBlock()).toEqual({ isolation: 'repeatable read', readOnly: true, deferrable: true, hasXid: false, savepoints: 0, cursors: 0 })
        run('commit; begin; select * from tb for update')
        expect(lease.transactionBlock()?.hasXid).toBe(false)
        run('rollback; insert into tb values (2); begin; select * from tb for update')
        expect(lease.transactionBlock()?.hasXid).toBe(true)
        run('rollback')
        // Cursors that end with the block, however they were opened; a held one of an earlier block is not one.
        run('declare held cursor with hold for select 1')
        run('begin; declare c1 cursor for select * from tb')
        expect(lease.transactionBlock()?.cursors).toBe(1)
        run(`do $$ declare c refcursor := 'from_function'; begin open c for select 1; end $$`)
        expect(lease.transactionBlock()?.cursors).toBe(2)
        run('close c1; close from_function')
        expect(lease.transactionBlock()?.cursors).toBe(0)
        lease.execProtocolRawStream(concat([serialize.parse({ text: 'select 1' }), serialize.bind({ portal: 'bound' }), serialize.sync()]), () => {})
        expect(lease.transactionBlock()?.cursors).toBe(1)
        run('rollback; close held')
      } finally {
        lease.release()
      }
    } finally {
      await db.close()
    }
  })
})

describe('lease.copyInFrom', () => {
  const copyData = (text: string) => serialize.copyData(Buffer.from(text))
  const run = (lease: Awaited<ReturnType<PGlite['lease']>>, sql: string, more: Uint8Array[]): string => {
    lease.copyInFrom(() => more.shift())
    const out: Uint8Array[] = []
    try {
      lease.execProtocolRawStream(serialize.query(sql), (bytes) => out.push(bytes.slice()))
    } finally {
      lease.copyInFrom(undefined)
    }
    return frameTypes(concat(out))
  }

  it('gives a COPY its data from the source once the message runs out, piece by piece', async () => {
    const db = await PGlite.create()
    try {
      await db.exec('create table c (a int)')
      const lease = await db.lease()
      try {
        expect(run(lease, 'copy c from stdin', [concat([copyData('1\n'), copyData('2\n')]), concat([copyData('3\n'), serialize.copyDone()])])).toBe('GCZ')
      } finally {
        lease.release()
      }
      expect((await db.query<{ n: number }>('select sum(a)::int as n from c')).rows).toEqual([{ n: 6 }])
    } finally {
      await db.close()
    }
  })

  // An attack on the mechanism: a source that hands over another message, a
  // cut frame or an oversized CopyFail would reach a backend every caller shares.
  it.each([
    ['a Query', () => serialize.query('drop table c')],
    ['a cut frame', () => copyData('1\n').subarray(0, 4)],
    ['a CopyDone before more data', () => concat([serialize.copyDone(), copyData('9\n')])],
    ['a CopyFail past its 10,000-byte limit', () => serialize.copyFail('x'.repeat(20_000))],
    ['nothing', () => new Uint8Array(0)],
  ])('fails the COPY (57014) when the source hands over %s, and the database goes on', async (_name, bad) => {
    const db = await PGlite.create()
    try {
      await db.exec('create table c (a int)')
      const lease = await db.lease()
      try {
        expect(run(lease, 'copy c from stdin', [copyData('1\n'), bad()])).toBe('GEZ')
      } finally {
        lease.release()
      }
      expect((await db.query<{ n: number }>('select count(*)::int as n from c')).rows).toEqual([{ n: 0 }])
    } finally {
      await db.close()
    }
  })
})
