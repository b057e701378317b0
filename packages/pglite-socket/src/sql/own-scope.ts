import { dropTempRelations } from './temp-relations.js'
import { dollarQuote } from './quoting.js'
import { splitStatements, type SqlStatement } from '@pgwasm/pglite/sql'
import { mentions } from './byte-scan.js'

/**
 * `DEALLOCATE ALL`, `CLOSE ALL`, `DISCARD ALL` and `DISCARD TEMP` act on the
 * whole engine session, which every client shares: one client's would drop
 * the others' prepared statements, held cursors and temporary relations (a
 * `pg` client's named statement then fails for good with 26000). Each is
 * run instead as a DO block that does the same to what is this client's,
 * and leaves what another client made (noted in session-objects.ts, or
 * named with another client's prefix by rename.ts).
 */

/** What the other clients of the engine hold, by the keys session-objects.ts notes. */
export interface OthersObjects {
  /** Oids of their temporary relations. */
  readonly relations: readonly string[]
  /** Names of their WITH HOLD cursors. */
  readonly cursors: readonly string[]
  /** Names of their SQL-prepared statements. */
  readonly statements: readonly string[]
}

/**
 * Whether SQL in `bytes[from, to)` may hold such a statement (byte scans; a
 * false positive costs a closer look). Not `all` alone: `UNION ALL` is
 * common in queries that run all the time.
 */
export function mayReachEveryClient(bytes: Uint8Array, from: number, to: number): boolean {
  return (
    mentions(bytes, from, to, 'discard') ||
    (mentions(bytes, from, to, 'all') && (mentions(bytes, from, to, 'deallocate') || mentions(bytes, from, to, 'close')))
  )
}

/**
 * `sql` with each such statement replaced by its DO block for the client
 * whose pid is `pid`; undefined when there is none. `inTransaction`: a
 * `DISCARD ALL` is then left for Postgres to refuse (25001), as it must.
 */
export function ownScoped(sql: string, pid: number, others: () => OthersObjects, inTransaction: boolean): string | undefined {
  let out = ''
  let last = 0
  let othersNow: OthersObjects | undefined
  for (const statement of splitStatements(sql)) {
    const kind = kindOf(statement, inTransaction)
    if (kind === undefined) continue
    out += sql.slice(last, statement.start) + doBlock(kind, pid, (othersNow ??= others()))
    last = statement.end
  }
  return last === 0 ? undefined : out + sql.slice(last)
}

type Kind = 'deallocate' | 'close' | 'discard' | 'temp'

function kindOf({ words }: SqlStatement, inTransaction: boolean): Kind | undefined {
  const [first, second, third] = words
  if (first === 'deallocate' && (second === 'all' || (second === 'prepare' && third === 'all')) && words.length === (second === 'all' ? 2 : 3)) return 'deallocate'
  if (first === 'close' && second === 'all' && words.length === 2) return 'close'
  if (first === 'discard' && words.length === 2) {
    if (second === 'all' && !inTransaction) return 'discard'
    if (second === 'temp' || second === 'temporary') return 'temp'
  }
  return undefined
}

/** A text[] literal of `values`, each dollar-quoted (no quoting setting changes how it reads). */
function textArray(values: readonly string[]): string {
  return values.length === 0 ? `'{}'::pg_catalog.text[]` : `ARRAY[${values.map((v) => dollarQuote(v, 'n')).join(', ')}]::pg_catalog.text[]`
}

function doBlock(kind: Kind, pid: number, others: OthersObjects): string {
  // This client's protocol-level names: `c<pid>_<name>` (rename.ts); another client's start `c<its pid>`.
  const own = `pg_catalog.starts_with(name, 'c${pid}_')`
  const foreign = `name ~ '^c[0-9]+[_.]'`
  const deallocate =
    `FOR s IN SELECT name FROM pg_catalog.pg_prepared_statements WHERE ${own} ` +
    `OR (from_sql AND NOT ${foreign} AND NOT name = ANY (${textArray(others.statements)})) LOOP ` +
    `EXECUTE 'DEALLOCATE ' || pg_catalog.quote_ident(s); END LOOP; `
  const close =
    // Not the unnamed portals: this loop's own is one of them.
    `FOR s IN SELECT name FROM pg_catalog.pg_cursors WHERE name <> '' AND NOT pg_catalog.starts_with(name, '<unnamed portal') AND (${own} ` +
    `OR (NOT ${foreign} AND NOT name = ANY (${textArray(others.cursors)}))) LOOP ` +
    `EXECUTE 'CLOSE ' || pg_catalog.quote_ident(s); END LOOP; `
  const temp = dropTempRelations(
    `c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND NOT c.oid::pg_catalog.text = ANY (${textArray(others.relations)})`,
  )
  let body: string
  if (kind === 'deallocate') body = deallocate
  else if (kind === 'close') body = close
  else if (kind === 'temp') body = temp
  // DISCARD ALL, as Postgres spells it out, each part for this client only (its advisory locks are its own already).
  else body = `${close}EXECUTE 'SET SESSION AUTHORIZATION DEFAULT'; EXECUTE 'RESET ALL'; ${deallocate}EXECUTE 'UNLISTEN *'; PERFORM pg_catalog.pg_advisory_unlock_all(); EXECUTE 'DISCARD PLANS'; ${temp}EXECUTE 'DISCARD SEQUENCES'; `
  return `DO ${dollarQuote(`DECLARE s pg_catalog.text; r record; BEGIN ${body}END`, 'pgwasm')}`
}
