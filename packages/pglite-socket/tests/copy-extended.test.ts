import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { errorFields, type BackendMessage } from '@pgwasm/test-support/backend'
import { queryFrame, SYNC, bindFrame, copyData, copyDone, describeFrame, executeFrame, parseFrame as parse } from '@pgwasm/test-support/frontend'
import { findNativePostgres, startNativePostgres } from '@pgwasm/test-support/native-postgres'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { servedTarget, type SuiteTarget } from './helpers.js'

/*
 * COPY FROM STDIN sent through the extended protocol (Parse, Bind,
 * Describe, Execute, its data, then Sync), and a table copied from one
 * connection's COPY TO STDOUT into another's COPY FROM STDIN while both
 * are open: the same assertions against pgwasm-server and, when
 * installed, native PostgreSQL.
 */

const WAIT_MS = 10_000
const native = findNativePostgres()

const BIND = bindFrame()
const DESCRIBE_PORTAL = describeFrame('P')
const EXECUTE = executeFrame()
const COPY_DONE = copyDone()

function summary(messages: BackendMessage[]): string[] {
  return messages.map((m) => {
    if (m.type === 'E') return `E ${errorFields(m.body).C}`
    if (m.type === 'C') return `C ${m.body.toString('utf8', 0, m.body.length - 1)}`
    if (m.type === 'Z') return `Z ${m.body.toString('latin1')}`
    if (m.type === 'd') return `d ${m.body.toString()}`
    return m.type
  })
}


function copySuite(name: string, start: () => Promise<SuiteTarget>): void {
  describe(`COPY FROM STDIN through the extended protocol (${name})`, () => {
    let target: SuiteTarget

    beforeAll(async () => {
      target = await start()
      const raw = await client()
      await raw.send(queryFrame('create table ce_src (v int); insert into ce_src select generate_series(1, 5); create table ce_tgt (v int)'))
      raw.destroy()
    })

    afterAll(async () => {
      await target?.stop()
    })

    async function client(): Promise<RawClient & { send(bytes: Buffer, until?: string): Promise<string[]> }> {
      const raw = new RawClient(target.port) as RawClient & { send(bytes: Buffer, until?: string): Promise<string[]> }
      await raw.handshake()
      raw.send = async (bytes, until = 'Z') => {
        raw.write(bytes)
        return summary(await within(raw.until(until), WAIT_MS, `message ${until}`))
      }
      return raw
    }

    it('answers Parse, Bind, Describe and Execute of COPY FROM STDIN before any Sync, then takes the data', async () => {
      const raw = await client()
      try {
        expect(await raw.send(Buffer.concat([parse('copy ce_tgt from stdin'), BIND, DESCRIBE_PORTAL, EXECUTE]), 'G')).toEqual(['1', '2', 'n', 'G'])
        expect(await raw.send(Buffer.concat([copyData('10\n11\n'), COPY_DONE, SYNC]))).toEqual(['C COPY 2', 'Z I'])
        expect(await raw.send(queryFrame('select count(*) from ce_tgt where v >= 10'))).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
        await raw.send(queryFrame('delete from ce_tgt'))
      } finally {
        raw.destroy()
      }
    })

    it('ignores a Sync sent with the Execute, as libpq sends one, and answers the one after CopyDone', async () => {
      const raw = await client()
      try {
        expect(await raw.send(Buffer.concat([parse('copy ce_tgt from stdin'), BIND, DESCRIBE_PORTAL, EXECUTE, SYNC]), 'G')).toEqual(['1', '2', 'n', 'G'])
        expect(await raw.send(Buffer.concat([copyData('20\n'), COPY_DONE, SYNC]))).toEqual(['C COPY 1', 'Z I'])
        // Exactly one ReadyForQuery came: the next query's answer is its own.
        expect(await raw.send(queryFrame('select 1'))).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
        await raw.send(queryFrame('delete from ce_tgt'))
      } finally {
        raw.destroy()
      }
    })

    it("reports a COPY's error after Execute, and answers the Sync", async () => {
      const raw = await client()
      try {
        const answer = await raw.send(Buffer.concat([parse('copy ce_missing from stdin'), BIND, EXECUTE, SYNC]))
        expect(answer.slice(-2)).toEqual(['E 42P01', 'Z I'])
      } finally {
        raw.destroy()
      }
    })

    it("copies a table from one connection's COPY TO STDOUT into another's COPY FROM STDIN while both are open", async () => {
      const reader = await client()
      const writer = await client()
      try {
        expect(await writer.send(Buffer.concat([parse('copy ce_tgt from stdin'), BIND, EXECUTE]), 'G')).toEqual(['1', '2', 'G'])
        const out = await reader.send(queryFrame('copy ce_src to stdout'))
        expect(out[0]).toBe('H')
        const rows = out.filter((m) => m.startsWith('d ')).map((m) => m.slice(2))
        expect(rows).toEqual(['1\n', '2\n', '3\n', '4\n', '5\n'])
        expect(await writer.send(Buffer.concat([...rows.map(copyData), COPY_DONE, SYNC]))).toEqual(['C COPY 5', 'Z I'])
        expect(await writer.send(queryFrame('select count(*) from ce_tgt'))).toEqual(['T', 'D', 'C SELECT 1', 'Z I'])
      } finally {
        reader.destroy()
        writer.destroy()
      }
    })
  })
}

// A short Sync guard: a client waiting for the server must not be taken for a stalling one.
copySuite('pgwasm', () => servedTarget({ syncTimeoutMs: 1000 }))

if (native) copySuite('native PostgreSQL', () => startNativePostgres(native))
else describe.skip('COPY FROM STDIN through the extended protocol (native PostgreSQL: initdb or pg_ctl not installed)', () => {})
