import { mayNameInternal, withoutForeignNames } from '../sql/foreign-names.js'
import { mayReachEveryClient, ownScoped, type OthersObjects } from '../sql/own-scope.js'
import { decodeUtf8 } from '../wire/wire.js'

/** What a rewrite may ask of the client whose SQL it rewrites. */
export interface RewriteClient {
  readonly processId: number
  /** The client is in a transaction block now. */
  readonly inTransaction: boolean
  /** The other clients' objects, looked up only when a rewrite needs them. */
  othersObjects(): OthersObjects
}

/** A rewrite of the SQL text of a client's Query or Parse before the engine sees it. */
export interface SqlRewrite {
  /** A byte scan of `bytes[start, end)`: false when the rewrite has nothing to do there (most SQL is never decoded). */
  readonly mayApply: (bytes: Uint8Array, start: number, end: number) => boolean
  /** The SQL rewritten, or undefined when it stays as it is. */
  readonly rewrite: (sql: string, client: RewriteClient) => string | undefined
}

/** The rewrites, in the order they apply: each sees the SQL as the ones before it left it. */
export const SQL_REWRITES: readonly SqlRewrite[] = [
  // Another client's statements and portals are not this client's to run, drop or read.
  { mayApply: mayNameInternal, rewrite: (sql, client) => withoutForeignNames(sql, client.processId) },
  // Nor are they this client's to drop all at once.
  {
    mayApply: mayReachEveryClient,
    rewrite: (sql, client) => ownScoped(sql, client.processId, () => client.othersObjects(), client.inTransaction),
  },
]

/** The SQL at `bytes[start, end)` made safe by {@link SQL_REWRITES}, or undefined when none applied. */
export function rewrittenSql(bytes: Uint8Array, start: number, end: number, client: RewriteClient): string | undefined {
  let sql: string | undefined
  for (const rule of SQL_REWRITES) {
    if (!rule.mayApply(bytes, start, end)) continue
    sql = rule.rewrite(sql ?? decodeUtf8(bytes.subarray(start, end)), client) ?? sql
  }
  return sql
}
