/**
 * Error messages name the client's own statements and portals, never the
 * names the server gives them on the shared engine.
 */
import { describe, expect, it } from 'vitest'
import { errorFields } from '@pgwasm/test-support/backend'
import { cstr, frame, int32 } from '@pgwasm/test-support/frontend'
import { withRawClient } from '@pgwasm/test-support/raw-client'
import { useServedDatabase } from './helpers.js'

describe('statement names in error messages', () => {
  const served = useServedDatabase()

  it("names the client's prepared statement in a Bind with too few parameters", async () => {
    const client = await served.connect()
    const text = 'select $1::int + $2::int as n'
    expect((await client.query({ name: 'add', text, values: [1, 2] })).rows).toEqual([{ n: 3 }])
    await expect(client.query({ name: 'add', text, values: [1] })).rejects.toMatchObject({
      code: '08P01',
      message: 'bind message supplies 1 parameters, but prepared statement "add" requires 2',
    })
  })

  it('names the unnamed statement "" in a Bind with too few parameters, first run and repeated', async () => {
    const client = await served.connect()
    const text = 'select $1::int * $2::int as n'
    for (let i = 0; i < 3; i++) {
      await expect(client.query(text, [1])).rejects.toMatchObject({
        message: 'bind message supplies 1 parameters, but prepared statement "" requires 2',
      })
      expect((await client.query(text, [2, 3])).rows).toEqual([{ n: 6 }])
    }
  })

  it('names a missing statement and portal as the client sent them', async () => {
    await withRawClient(served.port, async (raw) => {
      raw.write(Buffer.concat([frame('B', Buffer.concat([cstr('', 'nope'), int32(0), Buffer.from([0, 0])])), frame('S')]))
      const bind = (await raw.until('Z')).find((m) => m.type === 'E')
      expect(errorFields(bind!.body)).toMatchObject({ C: '26000', M: 'prepared statement "nope" does not exist' })
      raw.write(Buffer.concat([frame('E', Buffer.concat([cstr('my_portal'), int32(0)])), frame('S')]))
      const execute = (await raw.until('Z')).find((m) => m.type === 'E')
      expect(errorFields(execute!.body)).toMatchObject({ C: '34000', M: 'portal "my_portal" does not exist' })
    })
  })

  it('names a long statement name as the client sent it', async () => {
    const client = await served.connect()
    const name = `s${'x'.repeat(200)}`
    await client.query({ name, text: 'select $1::int as n', values: [1] })
    await expect(client.query({ name, text: 'select $1::int as n', values: [] })).rejects.toMatchObject({
      message: `bind message supplies 0 parameters, but prepared statement "${name}" requires 1`,
    })
  })
})
