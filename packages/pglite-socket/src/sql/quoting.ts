/** SQL literals and identifiers built from values. */

/** `name` as a quoted SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`
}

/** `value` between dollar quotes whose tag (`base`, lengthened) it does not contain: a client's value can never end them. */
export function dollarQuote(value: string, base = 'v'): string {
  let tag = base
  while (value.includes(`$${tag}$`)) tag += 'v'
  return `$${tag}$${value}$${tag}$`
}
