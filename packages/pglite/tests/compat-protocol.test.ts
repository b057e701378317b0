// `protocol`, `messages` and `parse` from the root entry, as
// `@electric-sql/pglite` exports them, against the engine's real replies.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGlite, messages, parse, protocol, types } from '@pgwasm/pglite'
import { concat } from './helpers.js'

type Message = { name: string; length: number }

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
  await db.exec("CREATE TABLE proto (id int PRIMARY KEY, label text); INSERT INTO proto VALUES (1, 'one'), (2, 'two')")
})

afterAll(async () => {
  await db.close()
})

function extendedQuery(text: string, values: string[]): Uint8Array[] {
  return [
    protocol.serialize.parse({ text }),
    protocol.serialize.describe({ type: 'S' }),
    protocol.serialize.bind({ values }),
    protocol.serialize.describe({ type: 'P' }),
    protocol.serialize.execute({}),
    protocol.serialize.sync(),
  ]
}

describe('protocol, messages and parse', () => {
  it('parses a raw reply split at every offset into the messages execProtocol returns', async () => {
    const request = concat(extendedQuery('SELECT id, label FROM proto WHERE id >= $1 ORDER BY id', ['1']))
    const raw = await db.execProtocolRaw(request)
    const { messages: expected } = await db.execProtocol(request)
    const names = expected.map((m) => m.name)
    expect(names).toEqual(['parseComplete', 'parameterDescription', 'rowDescription', 'bindComplete', 'rowDescription', 'dataRow', 'dataRow', 'commandComplete', 'readyForQuery'])
    for (let cut = 0; cut <= raw.length; cut++) {
      const got: Message[] = []
      const parser = new protocol.Parser()
      // An ArrayBuffer, then a view: Parser takes either.
      parser.parse(raw.slice(0, cut).buffer, (m) => got.push(m))
      parser.parse(raw.subarray(cut), (m) => got.push(m))
      expect(got.map((m) => m.name), `cut at ${cut}`).toEqual(names)
    }
  })

  it('builds the same results with parseResults as query() returns', async () => {
    const sql = 'SELECT id, label FROM proto WHERE id >= $1 ORDER BY id'
    const { messages: reply } = await db.execProtocol(concat(extendedQuery(sql, ['1'])))
    const [result] = parse.parseResults(reply, types.parsers)
    const direct = await db.query(sql, [1])
    expect(result!.rows).toEqual(direct.rows)
    expect(result!.fields).toEqual(direct.fields)
  })

  it('returns array rows and counts changed rows with parseResults', async () => {
    const { messages: reply } = await db.execProtocol(
      protocol.serialize.query("UPDATE proto SET label = label WHERE id > 0; SELECT id FROM proto ORDER BY id"),
    )
    const results = parse.parseResults(reply, types.parsers, { rowMode: 'array' })
    expect(results.map((r) => r.affectedRows)).toEqual([2, 2])
    expect(results[1]!.rows).toEqual([[1], [2]])
  })

  it('reads the parameter types of a described statement', async () => {
    const { messages: reply } = await db.execProtocol(
      concat([protocol.serialize.parse({ text: 'SELECT $1::int8 + $2::float8, $3::text' }), protocol.serialize.describe({ type: 'S' }), protocol.serialize.sync()]),
    )
    expect(parse.parseDescribeStatementResults(reply)).toEqual([types.INT8, types.FLOAT8, types.TEXT])
  })

  it('gives the reply messages the classes of the messages namespace', async () => {
    const { messages: reply } = await db.execProtocol(protocol.serialize.query('SELECT 1 AS one'))
    expect(reply.find((m) => m.name === 'rowDescription')).toBeInstanceOf(messages.RowDescriptionMessage)
    expect(reply.find((m) => m.name === 'dataRow')).toBeInstanceOf(messages.DataRowMessage)
    expect(reply.find((m) => m.name === 'readyForQuery')).toBeInstanceOf(messages.ReadyForQueryMessage)
  })
})
