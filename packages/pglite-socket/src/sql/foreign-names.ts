import { isWordByte } from './byte-scan.js'
import { dollarQuote } from './quoting.js'
import { splitStatements } from '@pgwasm/pglite/sql'

/**
 * Each client's protocol-level statements and portals live in the one
 * engine session under names only the server gives (`c<pid>_<name>`,
 * `c<pid>.u<n>`, see rename.ts). SQL can still name them: `EXECUTE`,
 * `DEALLOCATE`, `CLOSE`, `FETCH` and `MOVE` of another client's would run,
 * drop or read that client's state. Such a statement runs as one that names
 * a statement or cursor this session does not have: Postgres' own 26000 or
 * 34000, raised by the engine, so the transaction and the rest of the query
 * string fare as they would on a server.
 */

/** Statements that name a prepared statement or a portal. */
const NAMING = new Set(['execute', 'deallocate', 'close', 'fetch', 'move'])
/** A name the server gives: the pid of the client it belongs to, then `_` or `.`. */
const INTERNAL_NAME = /^c(\d+)[_.]/
/** An identifier: quoted (group 1, `""` for a quote) or plain. */
const IDENTIFIER = /"((?:[^"]|"")*)"|[A-Za-z_][A-Za-z0-9_$]*/g

/**
 * Whether `bytes[from, to)` may hold a server-given name: a `c` that starts
 * a word (or follows a quote) and is followed by a digit. One byte scan;
 * false positives only cost a closer look.
 */
export function mayNameInternal(bytes: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i + 1 < to; i++) {
    const b = bytes[i]!
    if ((b !== 0x63 && b !== 0x43) || bytes[i + 1]! < 0x30 || bytes[i + 1]! > 0x39) continue
    const before = i > from ? bytes[i - 1]! : 0x20
    if (before === 0x22 || !isWordByte(before)) return true
  }
  return false
}

/**
 * `sql` with each statement that names another client's statement or
 * portal replaced by one that raises the error naming it would raise in a
 * session without it; `undefined` when there is none. `ownId` is the
 * client's pid (its own names stay reachable, as in its own session).
 */
export function withoutForeignNames(sql: string, ownId: number): string | undefined {
  let out = ''
  let last = 0
  for (const statement of splitStatements(sql)) {
    const kind = statement.words.find((w) => NAMING.has(w))
    if (kind === undefined) continue
    const foreign = foreignName(sql.slice(statement.start, statement.end), ownId)
    if (foreign === undefined) continue
    out += sql.slice(last, statement.start) + raising(kind, foreign)
    last = statement.end
  }
  return last === 0 ? undefined : out + sql.slice(last)
}

function foreignName(text: string, ownId: number): string | undefined {
  for (const match of text.matchAll(IDENTIFIER)) {
    const name = match[1] !== undefined ? match[1].replace(/""/g, '"') : match[0].toLowerCase()
    const owner = INTERNAL_NAME.exec(name)
    if (owner && Number(owner[1]) !== ownId) return name
  }
  return undefined
}

function raising(kind: string, name: string): string {
  const [code, what] = kind === 'execute' || kind === 'deallocate' ? ['26000', 'prepared statement'] : ['34000', 'cursor']
  const message = `${what} "${name}" does not exist`.replace(/'/g, "''")
  return `DO ${dollarQuote(`BEGIN RAISE EXCEPTION USING ERRCODE = '${code}', MESSAGE = '${message}'; END`, 'pgwasm')}`
}
