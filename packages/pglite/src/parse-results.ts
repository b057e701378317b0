/**
 * PGlite's `parse` namespace: results from the message objects that
 * `execProtocol` returns, for code that runs its own protocol messages and
 * wants `query()`-shaped results back. `query()` itself never goes through
 * here: it decodes rows straight from the wire.
 */
import type { BackendMessage, CommandCompleteMessage, DataRowMessage, ParameterDescriptionMessage, RowDescriptionMessage } from 'pg-protocol/dist/messages.js'
import type { Field, QueryOptions, Results } from './query/results.js'
import type { Parser } from './types/index.js'

/** Commands whose tag's last number counts changed rows, as `query()` counts them. */
const COMMANDS_WITH_AFFECTED_ROWS = new Set(['INSERT', 'UPDATE', 'DELETE', 'COPY', 'MERGE'])

/**
 * One result per CommandComplete, in order, with rows parsed by
 * `options.parsers` over `defaultParsers` (types with neither stay
 * strings). `affectedRows` adds up over the statements so far, as
 * `exec()` reports it. `blob` is attached to every result, as what a
 * `COPY ... TO '/dev/blob'` among them wrote.
 */
export function parseResults(
  messages: readonly BackendMessage[],
  defaultParsers: Readonly<Record<number, Parser>>,
  options?: QueryOptions,
  blob?: Blob,
): Results[] {
  const results: Results[] = []
  const parsers = options?.parsers ? { ...defaultParsers, ...options.parsers } : defaultParsers
  const asArray = options?.rowMode === 'array'
  let fields: Field[] = []
  let rows: unknown[] = []
  let affectedRows = 0
  for (const message of messages) {
    switch (message.name) {
      case 'rowDescription':
        fields = (message as RowDescriptionMessage).fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID }))
        break
      case 'dataRow': {
        const values = (message as DataRowMessage).fields
        const row: unknown[] | Record<string, unknown> = asArray ? [] : {}
        for (let i = 0; i < fields.length; i++) {
          const text = values[i] ?? null
          const typeId = fields[i]!.dataTypeID
          const parse = parsers[typeId]
          const value = text === null || parse === undefined ? text : parse(text, typeId)
          if (Array.isArray(row)) row.push(value)
          else row[fields[i]!.name] = value
        }
        rows.push(row)
        break
      }
      case 'commandComplete': {
        const tag = (message as CommandCompleteMessage).text
        const command = tag.split(' ', 1)[0]!
        const count = Number.parseInt(tag.slice(tag.lastIndexOf(' ') + 1), 10)
        if (COMMANDS_WITH_AFFECTED_ROWS.has(command) && !Number.isNaN(count)) affectedRows += count
        results.push({ rows: rows as Results['rows'], fields, affectedRows, command, ...(blob ? { blob } : {}) })
        fields = []
        rows = []
        break
      }
    }
  }
  return results
}

/** The parameter type OIDs of a described statement (its ParameterDescription), or `[]`. */
export function parseDescribeStatementResults(messages: readonly BackendMessage[]): number[] {
  for (const message of messages) {
    if (message.name === 'parameterDescription') return [...(message as ParameterDescriptionMessage).dataTypeIDs]
  }
  return []
}
