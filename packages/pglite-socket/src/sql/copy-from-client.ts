import { splitStatements, type SqlStatement } from '@pgwasm/pglite/sql'

/**
 * The statements of `sql` when one of them is `COPY ... FROM STDIN`, else
 * undefined (most queries: a quick check spares them the split).
 */
export function splitIfCopyFromClient(sql: string): SqlStatement[] | undefined {
  if (!/copy/i.test(sql)) return undefined
  const statements = splitStatements(sql)
  return statements.some((s) => s.copiesFromClient) ? statements : undefined
}
