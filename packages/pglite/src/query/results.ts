import type { Field } from '../protocol/decode.js'
import type { NoticeFields } from '../protocol/messages.js'
import type { Parser, Serializer } from '../types/index.js'
import type { RowMode } from '../protocol/decode.js'

export type { Field, RowMode }

/** A query result, shaped as `@electric-sql/pglite` returns it. */
export interface Results<T = Record<string, unknown>> {
  /** Typed read-only; a plain mutable array at run time, as PGlite's. */
  readonly rows: T[]
  readonly fields: readonly Field[]
  /** Rows changed by INSERT/UPDATE/DELETE/COPY/MERGE (0 for others). */
  readonly affectedRows?: number
  /** The command tag's first word, e.g. `SELECT`, `INSERT`, `CREATE`. */
  readonly command?: string
  /** The row count of the command tag, when it has one. */
  readonly rowCount?: number
  /** What `COPY ... TO '/dev/blob'` wrote. */
  readonly blob?: Blob
}

/** A notice from the server (`RAISE NOTICE`, warnings). */
export type Notice = NoticeFields

export interface QueryOptions {
  /** `'object'` (default): rows keyed by column name; `'array'`: rows as arrays. */
  rowMode?: RowMode
  /** Per-query parsers by type OID, over the instance's. */
  parsers?: Record<number, Parser>
  /** Per-query serializers by parameter type OID, over the instance's. */
  serializers?: Record<number, Serializer>
  /** Input for `COPY ... FROM '/dev/blob'`. */
  blob?: Blob
  /** Called for every notice the statement raised. */
  onNotice?: (notice: Notice) => void
  /** Parameter type OIDs, when the server should not infer them. */
  paramTypes?: number[]
  /**
   * Stops the call when aborted: a statement that runs is canceled where
   * Postgres checks for interrupts (even one that only computes), its
   * transaction rolls back, and the call rejects with a `DatabaseError` of
   * code `57014`, as for a CancelRequest; a call still waiting for its turn
   * rejects the same way without running. Only code that runs can abort a
   * signal: on the thread that runs the engine, nothing else runs while a
   * statement does, so there `statement_timeout` is what stops one that
   * takes too long (a signal aborted from elsewhere still stops it: from
   * the page or thread that talks to a worker's engine).
   */
  signal?: AbortSignal
}

export interface DescribeQueryResult {
  queryParams: { dataTypeID: number; serializer: Serializer | undefined }[]
  resultFields: { name: string; dataTypeID: number; parser: Parser }[]
}
