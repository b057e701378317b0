/** SQL that names and drops the relations of the session's temporary schema. */

/** The keyword that names each kind of relation in ALTER and DROP. */
export const RELATION_KIND: Readonly<Record<string, string>> = {
  r: 'TABLE',
  p: 'TABLE',
  f: 'FOREIGN TABLE',
  v: 'VIEW',
  m: 'MATERIALIZED VIEW',
  S: 'SEQUENCE',
  i: 'INDEX',
  I: 'INDEX',
}

/** {@link RELATION_KIND} as the arms of an SQL `CASE relkind`. */
const KIND_CASES = Object.entries(RELATION_KIND)
  .map(([kind, keyword]) => `WHEN '${kind}' THEN '${keyword}'`)
  .join(' ')

/**
 * A PL/pgSQL loop (its block declares `r record`) that drops, CASCADE, each
 * relation of the session's temporary schema that `condition` selects (on
 * `c`, its pg_class row). One already gone (a cascade took it) or that
 * cannot go is skipped, so it does not stop the others.
 */
export function dropTempRelations(condition: string): string {
  return (
    `FOR r IN SELECT c.oid::pg_catalog.regclass AS name, c.relkind FROM pg_catalog.pg_class c ` +
    `WHERE c.relnamespace = pg_catalog.pg_my_temp_schema() AND (${condition}) LOOP ` +
    `BEGIN EXECUTE pg_catalog.format('DROP %s IF EXISTS %s CASCADE', CASE r.relkind ${KIND_CASES} ELSE 'TABLE' END, r.name); ` +
    `EXCEPTION WHEN OTHERS THEN NULL; END; END LOOP; `
  )
}
