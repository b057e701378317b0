import type { PostgresModule } from '../emscripten.js'
import type { RaisedError } from './session-guards.js'

/*
 * A superuser may declare any signature for a `LANGUAGE internal` or
 * `LANGUAGE c` function, and Postgres only checks that the symbol exists:
 * `create function f(int4) returns text language internal as 'textout'`
 * passes an integer where `textout` reads a pointer. On a server that
 * crashes one backend and the postmaster recovers; here it is an
 * out-of-bounds access in the one engine every client shares, which ends
 * it (and an in-memory database with it).
 *
 * So such a function must be stored as a function that already names the
 * same symbol: a built-in one for `internal`, a member of an installed
 * extension for `c` (extension scripts are ours and declare them right).
 * "Stored as" means, per argument and for the result, the same length and
 * by-value flag (`typlen`, `typbyval`): what the C code reads from a Datum.
 * An argument the named function takes as a polymorphic type (`anyelement`,
 * `"any"`) may be anything, since such functions look up what they got.
 * So is any count of arguments where it is variadic `"any"` (`num_nulls`).
 * So `citext(bpchar) as 'rtrim1'` (a text function given a bpchar) is
 * allowed, and so is any wrapper that renames a built-in for a domain or a
 * binary-compatible type.
 *
 * Checked after the statement ran, through SPI, only for CREATE FUNCTION
 * and CREATE PROCEDURE statements that name one of the two languages,
 * never inside an extension script.
 */

/** `LANGUAGE x` as `nodeToString` writes the DefElem of a CreateFunctionStmt. */
const LANGUAGE_OPTION = /:defname language :arg "((?:[^"\\]|\\.)*)"/

/**
 * Functions of either language that are neither built in nor an extension's
 * member, with no built-in or extension function of the same symbol stored
 * alike; one row, `null` when there are none.
 */
const UNSAFE_FUNCTIONS = `
with stored as (
  select t.oid, t.typlen, t.typbyval, t.typtype = 'p' and t.typname::text ~ '^any' as polymorphic
  from pg_catalog.pg_type t
),
declared as (
  select p.oid, p.prolang, p.prosrc, p.probin, p.proretset, p.prorettype, p.proargtypes::pg_catalog.oid[] as args
  from pg_catalog.pg_proc p join pg_catalog.pg_language l on l.oid = p.prolang
  where l.lanname in ('internal', 'c') and p.oid >= 16384
    and not exists (select from pg_catalog.pg_depend d where d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass and d.objid = p.oid and d.deptype = 'e')
)
select pg_catalog.string_agg(pg_catalog.format('%s as %L', u.oid::pg_catalog.regprocedure, u.prosrc), ', ')
from declared u
where not exists (
  select from pg_catalog.pg_proc b
  where b.oid <> u.oid and b.prolang = u.prolang and b.prosrc = u.prosrc and b.probin is not distinct from u.probin
    and b.proretset = u.proretset and (b.pronargs = pg_catalog.cardinality(u.args) or b.provariadic = 'pg_catalog."any"'::pg_catalog.regtype)
    and (b.oid < 16384 or exists (select from pg_catalog.pg_depend d where d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass and d.objid = b.oid and d.deptype = 'e'))
    and (select (r.typlen, r.typbyval) = (w.typlen, w.typbyval) from stored r, stored w where r.oid = b.prorettype and w.oid = u.prorettype)
    and not exists (
      select from rows from (pg_catalog.unnest(b.proargtypes::pg_catalog.oid[]), pg_catalog.unnest(u.args)) as a(theirs, ours)
      join stored x on x.oid = a.theirs join stored y on y.oid = a.ours
      where not x.polymorphic and (x.typlen, x.typbyval) <> (y.typlen, y.typbyval)
    )
)`

/** `SPI_OK_SELECT` in spi.h. */
const SPI_OK_SELECT = 5
/** `SPITupleTable`: `tupdesc`, then `vals`. */
const TUPTABLE_VALS = 4

type Fn = (...args: number[]) => number

/**
 * Whether a CREATE FUNCTION's text form (`nodeToString`) names the internal
 * or C language; a cheap filter before the catalog is read.
 */
export function namesUnsafeLanguage(nodeText: string): boolean {
  const language = LANGUAGE_OPTION.exec(nodeText)?.[1]?.toLowerCase()
  return language === 'internal' || language === 'c'
}

/**
 * The refusal for the functions of the running transaction's catalog that
 * are declared unlike the symbol they name, or undefined. Call from the
 * utility hook once the statement ran (SPI's command-counter step makes
 * the new row visible).
 */
export function unsafeFunctionRefusal(mod: PostgresModule, ex: Record<string, unknown>): RaisedError | undefined {
  const fn = ex as Record<string, Fn>
  const creatingExtension = (ex.creating_extension as WebAssembly.Global).value as number
  if (mod.HEAPU8[creatingExtension] !== 0) return undefined
  const tuptableAt = (ex.SPI_tuptable as WebAssembly.Global).value as number
  const sp = mod.stackSave()
  let found: string | null = null
  try {
    fn.SPI_connect!()
    const rc = fn.SPI_execute!(mod.stringToUTF8OnStack(UNSAFE_FUNCTIONS), 0, 1)
    if (rc === SPI_OK_SELECT) {
      const view = new DataView(mod.HEAPU8.buffer)
      const tuptable = view.getUint32(tuptableAt, true)
      const tuple = view.getUint32(view.getUint32(tuptable + TUPTABLE_VALS, true), true)
      const value = fn.SPI_getvalue!(tuple, view.getUint32(tuptable, true), 1)
      if (value !== 0) found = mod.UTF8ToString(value)
    }
    fn.SPI_finish!()
  } finally {
    mod.stackRestore(sp)
  }
  if (found === null) return undefined
  return {
    code: '42P13',
    message: `function ${found} is not declared as the function it names`,
    hint: 'A LANGUAGE internal or LANGUAGE c function must take and return types stored as those of a built-in or extension function with the same symbol (the same typlen and typbyval): called with other types, it would read memory it does not own and end the engine every client shares.',
  }
}
