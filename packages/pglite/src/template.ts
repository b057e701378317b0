/**
 * The tagged-template helpers on their own, as `@electric-sql/pglite/template`
 * exports them: `sql` builds a fragment, `query` turns one into
 * `{ query, params }`, `identifier` quotes a name and `raw` splices text.
 *
 * ```ts
 * import { query, identifier } from '@pgwasm/pglite/template'
 *
 * const q = query`SELECT * FROM ${identifier`my table`} WHERE id = ${7}`
 * await db.query(q.query, q.params)
 * ```
 * @packageDocumentation
 */
export { sql, raw, identifier, query } from './query/template.js'
export type { SqlFragment, SqlText, TemplatedQuery } from './query/template.js'
