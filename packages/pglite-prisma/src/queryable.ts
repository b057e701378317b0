/**
 * `queryRaw`/`executeRaw` on the core's lean query path, shared by the
 * adapter (the whole instance) and a transaction (the held session).
 */
import type { SqlQuery, SqlQueryable, SqlResultSet } from '@prisma/driver-adapter-utils'
import type { PGlite, Parser, QueryOptions, Results } from '@pgwasm/pglite'
import { toAdapterError } from './errors.js'
import { columnInfoOf, convertRows, prismaParsers, toParams } from './types.js'

/** The package name, reported to Prisma as the adapter's name. */
export const ADAPTER_NAME = '@pgwasm/pglite-prisma'

/**
 * What the adapter uses of a database: a `PGlite` has it, and so does any
 * object with these members (the adapter needs no more of the class).
 */
export type AdapterDatabase = Pick<PGlite, 'query' | 'exec' | 'transaction' | 'parsers'>

/** Something that runs one parameterized statement: a `PGlite` or a transaction of one. */
export interface QueryTarget {
  query<T>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>>
}

// One options object for every call (the core merges its parsers once):
// rows as arrays, as Prisma consumes them, and values Prisma reads as text
// (timestamps, dates, int8, JSON) kept text, never made a Date or object
// only to be turned back into a string.
const QUERY_OPTIONS: QueryOptions = { rowMode: 'array', parsers: prismaParsers }

/** The parsers a result was decoded with: the instance's, under the adapter's. */
const effectiveParsers = new WeakMap<Readonly<Record<number, Parser>>, Readonly<Record<number, Parser>>>()

function withPrismaParsers(instance: Readonly<Record<number, Parser>>): Readonly<Record<number, Parser>> {
  let merged = effectiveParsers.get(instance)
  if (!merged) effectiveParsers.set(instance, (merged = { ...instance, ...prismaParsers }))
  return merged
}

/** Runs Prisma's queries on a {@link QueryTarget}. */
export class PGliteQueryable implements SqlQueryable {
  readonly provider = 'postgres' as const
  readonly adapterName = ADAPTER_NAME
  readonly #target: () => QueryTarget
  readonly #parsers: () => Readonly<Record<number, Parser>>

  /**
   * @param target the target of each call, looked up per call (the database may be swapped by a test reset).
   * @param parsers the parsers of the instance behind `target` (they decide which values need converting).
   */
  constructor(target: () => QueryTarget, parsers: () => Readonly<Record<number, Parser>>) {
    this.#target = target
    this.#parsers = parsers
  }

  /** Runs a statement and returns its rows with column names and Prisma column types. */
  async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    const result = await this.#run(query)
    const info = columnInfoOf(result.fields, withPrismaParsers(this.#parsers()))
    convertRows(result.rows, info)
    // Copies: the column info is shared by every execution of the statement.
    return { columnNames: info.names.slice(), columnTypes: info.types.slice(), rows: result.rows }
  }

  /** Runs a statement and returns how many rows it affected (or returned, for a SELECT). */
  async executeRaw(query: SqlQuery): Promise<number> {
    const result = await this.#run(query)
    return result.rowCount ?? result.affectedRows ?? 0
  }

  async #run(query: SqlQuery): Promise<Results<unknown[]>> {
    const params = query.args.length === 0 ? query.args : toParams(query.args, query.argTypes)
    try {
      return await this.#target().query<unknown[]>(query.sql, params, QUERY_OPTIONS)
    } catch (error) {
      throw toAdapterError(error)
    }
  }
}
