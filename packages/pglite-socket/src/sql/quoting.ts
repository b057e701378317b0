/** SQL literals and identifiers built from values. */

// One quoting of identifiers for the core and the server.
export { quoteIdent } from '@pgwasm/pglite'

/** `value` between dollar quotes whose tag (`base`, lengthened) it does not contain: a client's value can never end them. */
export function dollarQuote(value: string, base = 'v'): string {
  let tag = base
  while (value.includes(`$${tag}$`)) tag += 'v'
  return `$${tag}$${value}$${tag}$`
}
