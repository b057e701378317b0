/**
 * Reading SQL text without the engine, as `@pgwasm/pglite/sql`: the
 * statement splitter that `@pgwasm/pglite-socket` and
 * `@pgwasm/pglite-prisma` share, and identifier quoting.
 *
 * @example
 * ```ts
 * import { splitStatements } from '@pgwasm/pglite/sql'
 * const script = "select ';'; select $$ a ; b $$"
 * splitStatements(script).map((s) => script.slice(s.start, s.end))
 * // ["select ';'", 'select $$ a ; b $$']
 * ```
 */
export { splitStatements, transactionControl } from './query/sql-split.js'
export type { SqlStatement, TransactionControl } from './query/sql-split.js'
export { quoteIdent } from './quote-ident.js'
