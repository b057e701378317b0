/**
 * `name` as a quoted SQL identifier (`my "table"` becomes `"my ""table"""`):
 * one identifier whatever it holds, case kept. Use it to put a name that is
 * not a constant into SQL text; values go as parameters.
 */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`
}
