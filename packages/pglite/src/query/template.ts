/**
 * Tagged templates that build parameterized SQL, compatible with
 * `@electric-sql/pglite/template`: values become `$n` parameters; `sql`
 * fragments nest; `identifier` and `raw` splice text in.
 */
import { quoteIdent } from '../quote-ident.js'

// Registry symbols: the ESM and CJS builds (and `/template`) each carry a
// copy of this module, and a fragment made by one must nest in another's.
const FRAGMENT = Symbol.for('pgwasm.sqlFragment')
const TEXT = Symbol.for('pgwasm.sqlText')

/** A piece of SQL with its own parameters, made by {@link sql}. */
export interface SqlFragment {
  readonly [FRAGMENT]: true
  /** Text pieces; `values[i]` goes between `strings[i]` and `strings[i + 1]`. */
  readonly strings: readonly string[]
  readonly values: readonly unknown[]
}

/** Text spliced in as is, made by {@link raw} or {@link identifier}. */
export interface SqlText {
  readonly [TEXT]: true
  readonly text: string
}

export interface TemplatedQuery {
  query: string
  params: unknown[]
}

function isFragment(value: unknown): value is SqlFragment {
  return typeof value === 'object' && value !== null && FRAGMENT in value
}

function isText(value: unknown): value is SqlText {
  return typeof value === 'object' && value !== null && TEXT in value
}

/** Builds a fragment; nested fragments and text pieces are flattened into it. */
export function sql(strings: TemplateStringsArray | readonly string[], ...values: unknown[]): SqlFragment {
  const outStrings: string[] = [strings[0] ?? '']
  const outValues: unknown[] = []
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    const next = strings[i + 1] ?? ''
    const last = outStrings.length - 1
    if (isText(value)) {
      outStrings[last] += value.text + next
    } else if (isFragment(value)) {
      outStrings[last] += value.strings[0] ?? ''
      for (let j = 0; j < value.values.length; j++) {
        outValues.push(value.values[j])
        outStrings.push(value.strings[j + 1] ?? '')
      }
      outStrings[outStrings.length - 1] += next
    } else {
      outValues.push(value)
      outStrings.push(next)
    }
  }
  return { [FRAGMENT]: true, strings: outStrings, values: outValues }
}

/** SQL text spliced in unescaped: never pass user input. */
export function raw(strings: TemplateStringsArray, ...values: unknown[]): SqlText {
  return { [TEXT]: true, text: String.raw({ raw: strings }, ...values) }
}

/** A quoted identifier (`"my ""table"""`), safe for any name. */
export function identifier(strings: TemplateStringsArray, ...values: unknown[]): SqlText {
  const name = String.raw({ raw: strings }, ...values)
  return { [TEXT]: true, text: quoteIdent(name) }
}

/** Turns a template into `{ query, params }` with `$1`, `$2`... placeholders. */
export function query(strings: TemplateStringsArray | readonly string[], ...values: unknown[]): TemplatedQuery {
  return toQuery(sql(strings, ...values))
}

export function toQuery(fragment: SqlFragment): TemplatedQuery {
  let text = fragment.strings[0]!
  for (let i = 0; i < fragment.values.length; i++) text += `$${i + 1}${fragment.strings[i + 1]}`
  return { query: text, params: [...fragment.values] }
}
