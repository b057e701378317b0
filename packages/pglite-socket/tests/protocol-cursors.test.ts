import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { errorFields, type BackendMessage } from '@pgwasm/test-support/backend'
import { queryFrame, SYNC, bindFrame, describeFrame, executeFrame as execute, parseFrame as parse } from '@pgwasm/test-support/frontend'
import { findNativePostgres, startNativePostgres } from '@pgwasm/test-support/native-postgres'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { servedTarget, type SuiteTarget } from './helpers.js'

/*
 * A cursor declared in SQL is a portal of the protocol, and a portal bound
 * through the protocol is a cursor SQL can FETCH (psycopg's server-side
 * cursors Describe and Execute the portal of their DECLARE): the same
 * assertions against pgwasm-server and, when installed, native PostgreSQL.
 */

const WAIT_MS = 10_000
const native = findNativePostgres()

const describePortal = (name: string): Buffer => describeFrame('P', name)
const bindPortal = (portal: string): Buffer => bindFrame([], '', portal)

/** Each message as a client sees it: type, and the value of one-column rows or the error's SQLSTATE. */
function summary(messages: BackendMessage[]): string[] {
  return messages.map((m) => {
    if (m.type === 'D') return `D ${m.body.toString('utf8', 6, 6 + m.body.readInt32BE(2))}`
    if (m.type === 'E') return `E ${errorFields(m.body).C}`
    if (m.type === 'C') return `C ${m.body.toString('utf8', 0, m.body.length - 1)}`
    if (m.type === 'Z') return `Z ${m.body.toString('latin1')}`
    return m.type
  })
}


function cursorSuite(name: string, start: () => Promise<SuiteTarget>): void {
  describe(`SQL cursors and protocol portals (${name})`, () => {
    let target: SuiteTarget

    beforeAll(async () => {
      target = await start()
    })

    afterAll(async () => {
      await target?.stop()
    })

    async function client(): Promise<RawClient & { send(bytes: Buffer): Promise<string[]> }> {
      const raw = new RawClient(target.port) as RawClient & { send(bytes: Buffer): Promise<string[]> }
      await raw.handshake()
      raw.send = async (bytes) => {
        raw.write(bytes)
        return summary(await within(raw.until('Z'), WAIT_MS, 'ReadyForQuery'))
      }
      return raw
    }

    it('describes and executes, in steps, the portal of a cursor declared in SQL', async () => {
      const raw = await client()
      try {
        expect(await raw.send(queryFrame('begin; declare pc_foo cursor for select g::text from generate_series(1, 5) g'))).toEqual([
          'C BEGIN',
          'C DECLARE CURSOR',
          'Z T',
        ])
        expect(await raw.send(Buffer.concat([describePortal('pc_foo'), execute('pc_foo', 2), SYNC]))).toEqual(['T', 'D 1', 'D 2', 's', 'Z T'])
        expect(await raw.send(Buffer.concat([execute('pc_foo', 0), SYNC]))).toEqual(['D 3', 'D 4', 'D 5', 'C SELECT 3', 'Z T'])
        expect(await raw.send(queryFrame('commit'))).toEqual(['C COMMIT', 'Z I'])
      } finally {
        raw.destroy()
      }
    })

    it('fetches in SQL from a portal bound through the protocol', async () => {
      const raw = await client()
      try {
        await raw.send(queryFrame('begin'))
        expect(await raw.send(Buffer.concat([parse('select g::text from generate_series(1, 4) g'), bindPortal('pc_bar'), execute('pc_bar', 1), SYNC]))).toEqual([
          '1',
          '2',
          'D 1',
          's',
          'Z T',
        ])
        expect(await raw.send(queryFrame('fetch 2 from pc_bar'))).toEqual(['T', 'D 2', 'D 3', 'C FETCH 2', 'Z T'])
        expect(await raw.send(queryFrame('close pc_bar; commit'))).toEqual(['C CLOSE CURSOR', 'C COMMIT', 'Z I'])
      } finally {
        raw.destroy()
      }
    })

    it("cannot reach another client's cursor WITH HOLD through the protocol", async () => {
      const owner = await client()
      const other = await client()
      try {
        await owner.send(queryFrame('declare pc_held cursor with hold for select 1::text'))
        expect(await other.send(Buffer.concat([execute('pc_held', 0), SYNC]))).toEqual(['E 34000', 'Z I'])
        expect(await owner.send(Buffer.concat([execute('pc_held', 0), SYNC]))).toEqual(['D 1', 'C SELECT 1', 'Z I'])
        await owner.send(queryFrame('close pc_held'))
      } finally {
        owner.destroy()
        other.destroy()
      }
    })
  })
}

cursorSuite('pgwasm', () => servedTarget())

if (native) cursorSuite('native PostgreSQL', () => startNativePostgres(native))
else describe.skip('SQL cursors and protocol portals (native PostgreSQL: initdb or pg_ctl not installed)', () => {})
