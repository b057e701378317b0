import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { errorFields, type BackendMessage } from '@pgwasm/test-support/backend'
import { frame, queryFrame, copyData, copyDone, copyFail } from '@pgwasm/test-support/frontend'
import { findNativePostgres, startNativePostgres } from '@pgwasm/test-support/native-postgres'
import { HOST } from '@pgwasm/test-support/net'
import { hasProgram, libpqEnv, run } from '@pgwasm/test-support/processes'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { servedTarget, useServedDatabase, type SuiteTarget } from './helpers.js'

const WAIT_MS = 10_000
const native = findNativePostgres()
const hasPsql = hasProgram('psql')

/** A message as the assertions compare it: what a client sees, not where in the server it came from. */
function summary(m: BackendMessage): string {
  switch (m.type) {
    case 'E':
    case 'N': {
      const f = errorFields(m.body)
      return `${m.type} ${f.C} ${f.M}${f.P ? ` @${f.P}` : ''}`
    }
    case 'C':
      return `C ${m.body.toString('utf8', 0, m.body.length - 1)}`
    case 'Z':
      return `Z ${m.body.toString('latin1')}`
    case 'D': {
      // One column, text: int16 count, int32 length, value.
      const length = m.body.readInt32BE(2)
      return `D ${length < 0 ? 'null' : m.body.toString('utf8', 6, 6 + length)}`
    }
    case 'G':
      return `G ${m.body.toString('hex')}`
    default:
      return m.type
  }
}

/** CopyInResponse of a text COPY into `columns` columns. */
const textCopyIn = (columns: number): string => `G 00${columns.toString(16).padStart(4, '0')}${'0000'.repeat(columns)}`


/**
 * The same assertions against our server and, when it is installed, native
 * PostgreSQL: "correct" here means what Postgres sends.
 */
function copySuite(name: string, start: () => Promise<SuiteTarget>): void {
  describe(`COPY FROM STDIN inside a multi-statement Query (${name})`, () => {
    let target: SuiteTarget
    let raw: RawClient

    beforeAll(async () => {
      target = await start()
    })

    afterAll(async () => {
      await target?.stop()
    })

    /** A fresh raw connection for each test; closed by `done()`. */
    async function connect(): Promise<RawClient> {
      raw = new RawClient(target.port)
      await raw.handshake()
      return raw
    }

    /** Sends `bytes` and returns the messages up to one of `stopAt`. */
    async function exchange(bytes: Buffer | Buffer[], stopAt: string[] = ['Z']): Promise<string[]> {
      raw.write(Array.isArray(bytes) ? Buffer.concat(bytes) : bytes)
      const out: string[] = []
      for (;;) {
        const m = await within(raw.next(), WAIT_MS, `a reply ending in one of ${stopAt.join(', ')}; got ${out.join(' | ')}`)
        if (!m) return [...out, 'closed']
        out.push(summary(m))
        if (stopAt.includes(m.type)) return out
      }
    }

    const one = async (sql: string): Promise<string[]> => exchange(queryFrame(sql))

    /** Shows the connection still answers, then closes it. */
    async function done(): Promise<void> {
      try {
        expect(await one('select 42')).toEqual(['T', 'D 42', 'C SELECT 1', 'Z I'])
      } finally {
        raw.destroy()
      }
    }

    it('runs the statements before the COPY, asks for data, then runs the rest and sends one ReadyForQuery', async () => {
      await connect()
      expect(await exchange(queryFrame('create table c1 (a int, b text); copy c1 from stdin; select count(*) from c1'), ['G', 'Z'])).toEqual([
        'C CREATE TABLE',
        textCopyIn(2),
      ])
      expect(await exchange([copyData('1\tone\n2\ttwo\n'), copyDone()])).toEqual(['C COPY 2', 'T', 'D 2', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('fails the COPY on CopyFail with 57014, skips the rest and rolls the implicit transaction back', async () => {
      await connect()
      expect(await exchange(queryFrame('create table c2 (a int); copy c2 from stdin; select 1'), ['G', 'Z'])).toEqual([
        'C CREATE TABLE',
        textCopyIn(1),
      ])
      expect(await exchange([copyData('1\n'), copyFail('client gave up')])).toEqual([
        'E 57014 COPY from stdin failed: client gave up',
        'Z I',
      ])
      expect(await one("select to_regclass('c2') is null")).toEqual(['T', 'D t', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('skips the COPY and the rest after an error in an earlier statement, without asking for data', async () => {
      await connect()
      expect(await one('create table c3 (a int); insert into c3 values (1/0); copy c3 from stdin; select 1')).toEqual([
        'C CREATE TABLE',
        'E 22012 division by zero',
        'Z I',
      ])
      await done()
    })

    it('reports a syntax error anywhere in the string before running any of it', async () => {
      await connect()
      expect(await one('create table c4 (a int); copy c4 from stdin; selec 1')).toEqual([
        'E 42601 syntax error at or near "selec" @46',
        'Z I',
      ])
      expect(await one("select to_regclass('c4') is null")).toEqual(['T', 'D t', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('answers a COPY into a missing table with its error at once, without asking for data', async () => {
      await connect()
      expect(await one('copy no_such_table from stdin')).toEqual(['E 42P01 relation "no_such_table" does not exist', 'Z I'])
      expect(await one('select 1; copy no_such_table from stdin; select 2')).toEqual([
        'T',
        'D 1',
        'C SELECT 1',
        'E 42P01 relation "no_such_table" does not exist',
        'Z I',
      ])
      await done()
    })

    it('runs two COPYs of one Query, each after its own CopyInResponse', async () => {
      await connect()
      await one('create table c5 (a int, b text)')
      expect(await exchange(queryFrame('copy c5 from stdin; copy c5 (a) from stdin; select count(*) from c5'), ['G', 'Z'])).toEqual([
        textCopyIn(2),
      ])
      expect(await exchange([copyData('1\tx\n'), copyDone()], ['G', 'Z'])).toEqual(['C COPY 1', textCopyIn(1)])
      expect(await exchange([copyData('2\n3\n'), copyDone()])).toEqual(['C COPY 2', 'T', 'D 3', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('loads 8 MB sent in 2,000 CopyData frames with every byte in place', async () => {
      await connect()
      await one('create table c_big (a int, b text)')
      expect(await exchange(queryFrame('copy c_big from stdin'), ['G', 'Z'])).toEqual([textCopyIn(2)])
      const rows: string[] = []
      const frames: Buffer[] = []
      for (let f = 0; f < 2000; f++) {
        const lines: string[] = []
        for (let i = 0; i < 4; i++) {
          const a = f * 4 + i
          const b = createHash('sha256').update(String(a)).digest('hex').repeat(31).slice(0, 1000)
          rows.push(b)
          lines.push(`${a}\t${b}\n`)
        }
        frames.push(copyData(lines.join('')))
      }
      expect(await exchange([...frames, copyDone()])).toEqual(['C COPY 8000', 'Z I'])
      const whole = createHash('md5').update(rows.join('')).digest('hex')
      expect(await one("select md5(string_agg(b, '' order by a)) from c_big")).toEqual(['T', `D ${whole}`, 'C SELECT 1', 'Z I'])
      await done()
    })

    it('keeps the open transaction block across the COPY and reports it failed after an error', async () => {
      await connect()
      await one('create table c6 (a int)')
      expect(await one('begin')).toEqual(['C BEGIN', 'Z T'])
      expect(await exchange(queryFrame('copy c6 from stdin; select 1/0; select 2'), ['G', 'Z'])).toEqual([textCopyIn(1)])
      expect(await exchange([copyData('1\n'), copyDone()])).toEqual(['C COPY 1', 'E 22012 division by zero', 'Z E'])
      expect(await one('select 1')).toEqual(['E 25P02 current transaction is aborted, commands ignored until end of transaction block', 'Z E'])
      expect(await one('copy c6 from stdin; select 1')).toEqual([
        'E 25P02 current transaction is aborted, commands ignored until end of transaction block',
        'Z E',
      ])
      expect(await one('rollback')).toEqual(['C ROLLBACK', 'Z I'])
      await done()
    })

    it('commits the implicit transaction before the last CommandComplete, so a deferred violation replaces it', async () => {
      await connect()
      await one('create table c7p (a int primary key); create table c7 (a int references c7p deferrable initially deferred)')
      expect(await exchange(queryFrame('insert into c7 values (99); copy c7p from stdin; select 3'), ['G', 'Z'])).toEqual([
        'C INSERT 0 1',
        textCopyIn(1),
      ])
      const reply = await exchange([copyData('1\n'), copyDone()])
      expect(reply.slice(0, 3)).toEqual(['C COPY 1', 'T', 'D 3'])
      expect(reply.slice(3)).toEqual([expect.stringMatching(/^E 23503 insert or update on table "c7" violates foreign key constraint/), 'Z I'])
      expect(await one('select count(*) from c7p')).toEqual(['T', 'D 0', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('lets a BEGIN after the COPY turn the implicit transaction into a block the client ends', async () => {
      await connect()
      await one('create table c8 (a int)')
      expect(await exchange(queryFrame('copy c8 from stdin; begin; select 1'), ['G', 'Z'])).toEqual([textCopyIn(1)])
      expect(await exchange([copyData('1\n'), copyDone()])).toEqual(['C COPY 1', 'C BEGIN', 'T', 'D 1', 'C SELECT 1', 'Z T'])
      expect(await one('rollback')).toEqual(['C ROLLBACK', 'Z I'])
      expect(await one('select count(*) from c8')).toEqual(['T', 'D 0', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('warns on a COMMIT after the COPY, commits, and fails a later SAVEPOINT as outside a block', async () => {
      await connect()
      await one('create table c9 (a int)')
      expect(await exchange(queryFrame('select 1; copy c9 from stdin; commit; select 2; savepoint s'), ['G', 'Z'])).toEqual([
        'T',
        'D 1',
        'C SELECT 1',
        textCopyIn(1),
      ])
      expect(await exchange([copyData('5\n'), copyDone()])).toEqual([
        'C COPY 1',
        'N 25P01 there is no transaction in progress',
        'C COMMIT',
        'T',
        'D 2',
        'C SELECT 1',
        'E 25P01 SAVEPOINT can only be used in transaction blocks',
        'Z I',
      ])
      expect(await one('select count(*) from c9')).toEqual(['T', 'D 1', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('fails COMMIT AND CHAIN after the COPY and rolls the implicit transaction back', async () => {
      await connect()
      await one('create table c10 (a int)')
      expect(await exchange(queryFrame('copy c10 from stdin; commit and chain'), ['G', 'Z'])).toEqual([textCopyIn(1)])
      expect(await exchange([copyData('1\n'), copyDone()])).toEqual([
        'C COPY 1',
        'E 25P01 COMMIT AND CHAIN can only be used in transaction blocks',
        'Z I',
      ])
      expect(await one('select count(*) from c10')).toEqual(['T', 'D 0', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('counts error positions from the start of the whole string', async () => {
      await connect()
      await one('create table c11 (a int)')
      expect(await exchange(queryFrame("select 'é;'; copy c11 from stdin; select nosuch from c11"), ['G', 'Z'])).toEqual([
        'T',
        'D é;',
        'C SELECT 1',
        textCopyIn(1),
      ])
      expect(await exchange([copyData('1\n'), copyDone()])).toEqual(['C COPY 1', 'E 42703 column "nosuch" does not exist @42', 'Z I'])
      await done()
    })

    it('splits around semicolons in strings, dollar quotes, quoted names and nested comments', async () => {
      await connect()
      await one('create table "c;12" (a text)')
      const sql = `select E'\\';' as x /* ; /* ; */ ; */; copy "c;12" from stdin; select $t$;$t$ || count(*) from "c;12" -- ;`
      expect(await exchange(queryFrame(sql), ['G', 'Z'])).toEqual(['T', "D ';", 'C SELECT 1', textCopyIn(1)])
      expect(await exchange([copyData('a;b\n'), copyDone()])).toEqual(['C COPY 1', 'T', 'D ;1', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('keeps a BEGIN ATOMIC body and a CREATE RULE action list whole around a COPY', async () => {
      await connect()
      await one('create table c16 (a int); create table c16_log (a int); create table c16_more (a int)')
      const sql = [
        'create function c16_twice(x int) returns int language sql begin atomic select case when x > 0 then x * 2 else 0 end; end',
        'create rule c16_r as on insert to c16 do also (insert into c16_log values (new.a); insert into c16_more values (new.a))',
        'copy c16 from stdin',
        'select c16_twice(count(*)::int) from c16_log',
      ].join('; ')
      expect(await exchange(queryFrame(sql), ['G', 'Z'])).toEqual(['C CREATE FUNCTION', 'C CREATE RULE', textCopyIn(1)])
      // COPY does not fire rules: the logs stay empty.
      expect(await exchange([copyData('1\n2\n'), copyDone()])).toEqual(['C COPY 2', 'T', 'D 0', 'C SELECT 1', 'Z I'])
      await done()
    })

    it('ignores Sync and Flush during COPY, as libpq may send them', async () => {
      await connect()
      await one('create table c13 (a int)')
      expect(await exchange(queryFrame('copy c13 from stdin; select count(*) from c13'), ['G', 'Z'])).toEqual([textCopyIn(1)])
      expect(await exchange([copyData('1\n'), frame('S'), frame('H'), copyData('2\n'), copyDone()])).toEqual([
        'C COPY 2',
        'T',
        'D 2',
        'C SELECT 1',
        'Z I',
      ])
      await done()
    })

    it('sends the CopyInResponse of a binary COPY with its format and column count', async () => {
      await connect()
      await one('create table c14 (a int, b int, c int)')
      expect(await exchange(queryFrame('copy c14 from stdin with (format binary); select 1'), ['G', 'Z'])).toEqual([
        'G 010003000100010001',
      ])
      expect(await exchange(copyFail('no binary today'))).toEqual(['E 57014 COPY from stdin failed: no binary today', 'Z I'])
      await done()
    })

    it('ends the connection when another message comes during COPY, as Postgres does', async () => {
      await connect()
      await one('create table c15 (a int)')
      expect(await exchange(queryFrame('select 1; copy c15 from stdin'), ['G', 'Z'])).toEqual(['T', 'D 1', 'C SELECT 1', textCopyIn(1)])
      expect(await exchange([copyData('1\n'), queryFrame('select 2')])).toEqual([
        'E 08P01 unexpected message type 0x51 during COPY from stdin',
        'E 08P01 terminating connection because protocol synchronization was lost',
        'closed',
      ])
      raw.destroy()
      await connect()
      expect(await one('select count(*) from c15')).toEqual(['T', 'D 0', 'C SELECT 1', 'Z I'])
      await done()
    })

    it.skipIf(!hasPsql)('runs a psql script whose multi-statement lines hold COPY FROM STDIN with inline data [needs psql]', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'pgwasm-copy-'))
      try {
        const script = join(dir, 'copy.sql')
        writeFileSync(
          script,
          [
            'create table p1 (a int, b text); copy p1 from stdin; select count(*) as n from p1;',
            '1\tone',
            '2\ttwo',
            '\\.',
            "select 'multi' \\; copy p1 from stdin \\; copy p1 (a) from stdin \\; select count(*) from p1;",
            '3\tthree',
            '\\.',
            '4',
            '\\.',
            "insert into p1 values (5, 'five') \\; copy p1 from stdin \\; select 1/0;",
            '6\tsix',
            '\\.',
            "select string_agg(a::text, ',' order by a) from p1;",
            '',
          ].join('\n'),
        )
        const url = `postgresql://postgres@${HOST}:${target.port}/postgres`
        const result = await run('psql', ['-X', '-q', '-A', '-t', '-f', script, url], { timeoutMs: 60_000, env: libpqEnv() })
        expect(result.stdout).toBe('2\nmulti\n4\n1,2,3,4\n')
        expect(result.stderr).toMatch(/^psql:[^\n]*: ERROR: {2}division by zero\n$/)
        expect(result.code).toBe(0)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  })
}

copySuite('pgwasm', () => servedTarget())

if (native) copySuite('native PostgreSQL', () => startNativePostgres(native))
else describe.skip('COPY FROM STDIN inside a multi-statement Query (native PostgreSQL: initdb or pg_ctl not installed)', () => {})

describe('COPY FROM STDIN and other clients', () => {
  const served = useServedDatabase({}, (db) => db.exec('create table shared (a int)'))

  it("keeps other clients out of the implicit transaction while a multi-statement COPY waits for data, then lets them in", async () => {
    const raw = new RawClient(served.port)
    const other = await served.connect()
    try {
      await raw.handshake()
      raw.write(queryFrame('insert into shared values (1); copy shared from stdin; select count(*) from shared'))
      expect((await within(raw.until('G'), WAIT_MS, 'CopyInResponse')).map((m) => m.type)).toEqual(['C', 'G'])
      const fromOther = other.query<{ n: number }>('select count(*)::int as n from shared')
      raw.write(Buffer.concat([copyData('2\n'), copyDone()]))
      const reply = await within(raw.until('Z'), WAIT_MS, 'the rest of the query')
      expect(reply.map((m) => m.type)).toEqual(['C', 'T', 'D', 'C', 'Z'])
      // Sent while the transaction was open, it saw neither the uncommitted row nor half of it: it waited for the commit.
      expect((await within(fromOther, WAIT_MS, "the other client's query")).rows).toEqual([{ n: 2 }])
    } finally {
      raw.destroy()
    }
  })

  it('rolls back a multi-statement COPY whose client leaves while the server waits for its data', async () => {
    const raw = new RawClient(served.port)
    const other = await served.connect()
    try {
      await raw.handshake()
      raw.write(queryFrame('insert into shared values (100); copy shared from stdin'))
      await within(raw.until('G'), WAIT_MS, 'CopyInResponse')
      const fromOther = other.query<{ n: number }>('select count(*)::int as n from shared where a = 100')
      raw.destroy()
      expect((await within(fromOther, WAIT_MS, "the other client's query")).rows).toEqual([{ n: 0 }])
      expect((await served.db.query<{ n: number }>('select count(*)::int as n from shared where a = 100')).rows).toEqual([{ n: 0 }])
    } finally {
      raw.destroy()
    }
  })
})
