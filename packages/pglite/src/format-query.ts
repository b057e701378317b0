/**
 * `formatQuery`: a parameterized query with its values spliced in as SQL
 * literals, for logs and for tools that need one self-contained string.
 * The server does the quoting (`format('%L')` on each value cast to its
 * described type), so the text is what PostgreSQL itself would print.
 */
import type { QueryOptions } from './query/results.js'

/** The part of `PGlite` formatQuery calls. */
export interface FormatQueryTarget {
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<{ readonly rows: T[] }>
}

/** What describes a statement's parameters: `PGlite` has it, a `Transaction` does not. */
interface Describer {
  describeQuery(sql: string): Promise<{ queryParams: readonly { dataTypeID: number }[] }>
}

const TEXT_OID = 25

function canDescribe(target: object): target is Describer {
  return typeof (target as Partial<Describer>).describeQuery === 'function'
}

/**
 * Rewrites `$n` placeholders to `format()`'s `%n$L` and doubles every other
 * `%`, leaving string literals, quoted identifiers, dollar-quoted bodies
 * and comments as they are (a `$1` inside them is text, not a parameter).
 */
export function toFormatString(query: string): string {
  let out = ''
  let i = 0
  const n = query.length
  while (i < n) {
    const c = query[i]!
    if (c === "'" || c === '"') {
      let j = i + 1
      while (j < n && !(query[j] === c && query[j + 1] !== c)) j += query[j] === c ? 2 : 1
      out += query.slice(i, j + 1).replace(/%/g, '%%')
      i = j + 1
    } else if (c === '-' && query[i + 1] === '-') {
      const end = query.indexOf('\n', i)
      const j = end < 0 ? n : end
      out += query.slice(i, j).replace(/%/g, '%%')
      i = j
    } else if (c === '/' && query[i + 1] === '*') {
      const end = query.indexOf('*/', i + 2)
      const j = end < 0 ? n : end + 2
      out += query.slice(i, j).replace(/%/g, '%%')
      i = j
    } else if (c === '$') {
      const number = /^\$(\d+)/.exec(query.slice(i))
      const tag = number ? null : /^\$[A-Za-z_][A-Za-z0-9_]*\$|^\$\$/.exec(query.slice(i))
      if (number) {
        out += `%${number[1]}$L`
        i += number[0].length
      } else if (tag) {
        const end = query.indexOf(tag[0], i + tag[0].length)
        const j = end < 0 ? n : end + tag[0].length
        out += query.slice(i, j).replace(/%/g, '%%')
        i = j
      } else {
        out += c
        i++
      }
    } else {
      out += c === '%' ? '%%' : c
      i++
    }
  }
  return out
}

async function describeParams(target: FormatQueryTarget, query: string): Promise<number[]> {
  if (canDescribe(target)) return (await target.describeQuery(query)).queryParams.map((p) => p.dataTypeID)
  // A transaction has no describeQuery: PREPARE reports the same types
  // through pg_prepared_statements, inside the transaction.
  const name = 'pgwasm_format_query'
  await target.query(`PREPARE ${name} AS ${query}`)
  try {
    const { rows } = await target.query<{ types: number[] }>(
      'SELECT parameter_types::oid[] AS types FROM pg_prepared_statements WHERE name = $1',
      [name],
    )
    return rows[0]?.types ?? []
  } finally {
    await target.query(`DEALLOCATE ${name}`)
  }
}

/**
 * Returns `query` with each `$n` replaced by the literal of `params[n - 1]`,
 * serialized for the parameter's type as `query()` would send it. Tables
 * and types the query names must exist (the server describes it); pass the
 * open transaction as `tx` to describe and format inside it.
 * @throws {DatabaseError} when the server cannot prepare the query.
 */
export async function formatQuery(
  pg: FormatQueryTarget,
  query: string,
  params?: readonly unknown[] | null,
  tx?: FormatQueryTarget,
): Promise<string> {
  const target = tx ?? pg
  if (!params || params.length === 0) return query
  const types = await describeParams(target, query)
  const placeholders = types.map((_, i) => `$${i + 2}`).join(', ')
  const { rows } = await target.query<{ formatted: string }>(
    `SELECT format($1${placeholders ? `, ${placeholders}` : ''}) AS formatted`,
    [toFormatString(query), ...params.slice(0, types.length)],
    { paramTypes: [TEXT_OID, ...types] },
  )
  return rows[0]!.formatted
}
