/**
 * A plain SQL dump (schema and data) generated from the catalogs, in the
 * order pg_dump uses: definitions, then data as COPY blocks, then the
 * constraints, indexes and triggers that would slow or block the load.
 * Definitions come out of Postgres' own deparsers (`format_type`,
 * `pg_get_functiondef`, `pg_get_viewdef`, `pg_get_constraintdef`, ...) read
 * with an empty `search_path`, so every name in them is schema-qualified.
 *
 * Left out, as with `pg_dump --no-owner --no-privileges`: ownership and
 * grants. Not dumped: aggregates, operators, casts, user-defined base types,
 * foreign tables, publications, large objects, and extension configuration
 * tables (an extension's own objects are re-made by CREATE EXTENSION).
 */
import type { Transaction } from './transaction-types.js'

/** The part of a database this needs: one transaction holding the instance. */
export interface SqlDumpSource {
  transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T>
}

/** Objects that are not part of a user database. */
const USER_NS = `n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_(toast|temp_)'`

/**
 * Not created by an extension (CREATE EXTENSION re-makes those) and, for
 * functions and types, not internal to another object (a range type's
 * constructors, which CREATE TYPE re-makes). Tables have internal
 * dependencies on themselves (partition keys), so theirs do not count.
 */
const notMember = (catalog: 'pg_class' | 'pg_proc' | 'pg_type' | 'pg_namespace', oid: string): string =>
  `NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = '${catalog}'::regclass AND e.objid = ${oid} AND e.deptype IN (${
    catalog === 'pg_proc' || catalog === 'pg_type' ? `'e', 'i'` : `'e'`
  }))`

const HEADER = `--
-- PostgreSQL database dump, written by @pgwasm/pglite dumpSql()
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET client_min_messages = warning;
SET row_security = off;
`

/** Pre-data objects sort by this when no dependency decides (pg_dump's broad order). */
const RANK = { ns: 0, ext: 1, type: 2, seq: 3, proc: 4, table: 5, view: 6 } as const

interface Definition {
  readonly key: string
  readonly rank: number
  readonly oid: number
  readonly sql: string
}

type Value = string | boolean | number | null | undefined
type Row = Record<string, Value>

/**
 * Writes the database as SQL that `psql -v ON_ERROR_STOP=1 -f dump.sql`
 * loads into an empty PostgreSQL database.
 */
export async function dumpSql(db: SqlDumpSource): Promise<string> {
  return db.transaction(async (tx) => {
    // One snapshot for every read; names deparsed fully qualified.
    await tx.exec(`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; SELECT pg_catalog.set_config('search_path', '', true)`)
    try {
      return await writeDump(tx)
    } finally {
      await tx.rollback()
    }
  })
}

async function select(tx: Transaction, sql: string): Promise<Row[]> {
  // exec (simple protocol): the dump's one-off statements stay out of the statement cache.
  const results = await tx.exec(sql)
  return results[results.length - 1]!.rows as Row[]
}

const text = (v: Value): string => (v === null || v === undefined ? '' : String(v))

async function writeDump(tx: Transaction): Promise<string> {
  const defs: Definition[] = []
  const add = (key: string, rank: number, oid: Value, sql: Value): void => {
    defs.push({ key, rank, oid: Number(oid), sql: text(sql) })
  }

  for (const r of await select(
    tx,
    `SELECT n.oid::text AS oid, format('CREATE SCHEMA IF NOT EXISTS %I;', n.nspname) AS sql
     FROM pg_namespace n WHERE ${USER_NS} AND ${notMember('pg_namespace', 'n.oid')}`,
  )) {
    add(`ns:${r.oid}`, RANK.ns, r.oid, r.sql)
  }

  for (const r of await select(
    tx,
    `SELECT x.oid::text AS oid, format('CREATE EXTENSION IF NOT EXISTS %I WITH SCHEMA %I;', x.extname, n.nspname) AS sql
     FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace`,
  )) {
    add(`ext:${r.oid}`, RANK.ext, r.oid, r.sql)
  }

  for (const r of await select(tx, TYPES_SQL)) add(`type:${r.oid}`, RANK.type, r.oid, r.sql)

  const sequences = await select(tx, SEQUENCES_SQL)
  for (const r of sequences) if (!r.identity) add(`class:${r.oid}`, RANK.seq, r.oid, r.sql)

  for (const r of await select(
    tx,
    `SELECT p.oid::text AS oid, pg_get_functiondef(p.oid) || ';' AS sql
     FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE ${USER_NS} AND p.prokind IN ('f', 'p', 'w') AND ${notMember('pg_proc', 'p.oid')}`,
  )) {
    add(`proc:${r.oid}`, RANK.proc, r.oid, r.sql)
  }

  const tables = await select(tx, TABLES_SQL)
  const columns = await select(tx, COLUMNS_SQL)
  const columnsOf = new Map<string, Row[]>()
  for (const c of columns) {
    const list = columnsOf.get(text(c.rel)) ?? []
    list.push(c)
    columnsOf.set(text(c.rel), list)
  }
  for (const t of tables) add(`class:${t.oid}`, RANK.table, t.oid, tableDefinition(t, columnsOf.get(text(t.oid)) ?? []))

  const views = await select(tx, VIEWS_SQL)
  for (const v of views) add(`class:${v.oid}`, RANK.view, v.oid, v.sql)

  const ordered = orderByDependencies(defs, await dependencyEdges(tx, tables))

  const out: string[] = [HEADER]
  section(out, 'Definitions', ordered.map((d) => d.sql))

  const data: string[] = []
  for (const t of tables) {
    if (t.relkind !== 'r') continue
    const cols = (columnsOf.get(text(t.oid)) ?? []).filter((c) => !c.generated).map((c) => text(c.col))
    if (cols.length === 0) continue
    const [result] = await tx.exec(`COPY ${text(t.q)} (${cols.join(', ')}) TO '/dev/blob'`)
    const rows = result?.blob ? await result.blob.text() : ''
    data.push(`COPY ${text(t.q)} (${cols.join(', ')}) FROM stdin;\n${rows}\\.\n`)
  }
  section(out, 'Data', data)

  const values: string[] = []
  for (const s of sequences) {
    const [state] = await select(tx, `SELECT last_value::text AS last, is_called FROM ${text(s.q)}`)
    if (state) values.push(`SELECT pg_catalog.setval(${text(s.lit)}, ${text(state.last)}, ${state.is_called ? 'true' : 'false'});`)
  }
  section(out, 'Sequence values', values)

  const post: string[] = []
  for (const r of await select(tx, CONSTRAINTS_SQL)) post.push(text(r.sql))
  for (const r of await select(tx, INDEXES_SQL)) post.push(text(r.sql))
  for (const s of sequences) if (s.owned) post.push(text(s.owned))
  for (const v of ordered) {
    const view = views.find((x) => `class:${text(x.oid)}` === v.key)
    if (view?.refresh) post.push(text(view.refresh))
  }
  for (const r of await select(tx, TRIGGERS_SQL)) post.push(text(r.sql))
  for (const r of await select(tx, POLICIES_SQL)) post.push(text(r.sql))
  section(out, 'Constraints, indexes, triggers', post)

  section(out, 'Comments', (await select(tx, COMMENTS_SQL)).map((r) => text(r.sql)))
  out.push('--\n-- PostgreSQL database dump complete\n--\n')
  return out.join('\n')
}

function section(out: string[], title: string, statements: readonly string[]): void {
  if (statements.length === 0) return
  out.push(`--\n-- ${title}\n--\n`)
  for (const s of statements) out.push(s.endsWith('\n') ? s : `${s}\n`)
}

const TYPES_SQL = `
SELECT t.oid::text AS oid,
  CASE t.typtype
    WHEN 'e' THEN format('CREATE TYPE %I.%I AS ENUM (%s);', n.nspname, t.typname,
      (SELECT coalesce(string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder), '') FROM pg_enum e WHERE e.enumtypid = t.oid))
    WHEN 'd' THEN format('CREATE DOMAIN %I.%I AS %s%s%s%s%s;', n.nspname, t.typname, format_type(t.typbasetype, t.typtypmod),
      CASE WHEN t.typcollation <> 0 AND t.typcollation <> bt.typcollation
        THEN (SELECT format(' COLLATE %I.%I', cn.nspname, co.collname) FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace WHERE co.oid = t.typcollation) ELSE '' END,
      CASE WHEN t.typdefault IS NOT NULL THEN ' DEFAULT ' || t.typdefault ELSE '' END,
      CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END,
      (SELECT coalesce(string_agg(format(' CONSTRAINT %I %s', c.conname, pg_get_constraintdef(c.oid)), '' ORDER BY c.conname), '')
       FROM pg_constraint c WHERE c.contypid = t.oid AND c.contype = 'c'))
    WHEN 'c' THEN format('CREATE TYPE %I.%I AS (%s);', n.nspname, t.typname,
      (SELECT coalesce(string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum), '')
       FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped))
    WHEN 'r' THEN (SELECT format('CREATE TYPE %I.%I AS RANGE (subtype = %s%s%s, multirange_type_name = %s);', n.nspname, t.typname,
        format_type(r.rngsubtype, NULL),
        CASE WHEN r.rngcollation <> 0 AND r.rngcollation <> st.typcollation
          THEN (SELECT format(', collation = %I.%I', cn.nspname, co.collname) FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace WHERE co.oid = r.rngcollation) ELSE '' END,
        CASE WHEN r.rngsubdiff <> 0 THEN ', subtype_diff = ' || r.rngsubdiff::regproc::text ELSE '' END,
        format_type(r.rngmultitypid, NULL))
      FROM pg_range r JOIN pg_type st ON st.oid = r.rngsubtype WHERE r.rngtypid = t.oid)
  END AS sql
FROM pg_type t
JOIN pg_namespace n ON n.oid = t.typnamespace
LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
WHERE ${USER_NS} AND ${notMember('pg_type', 't.oid')}
  AND (t.typtype IN ('e', 'd', 'r') OR (t.typtype = 'c' AND (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c'))`

/** Sequences, identity ones included: their values are set after the data. */
const SEQUENCES_SQL = `
SELECT c.oid::text AS oid, format('%I.%I', n.nspname, c.relname) AS q, quote_literal(format('%I.%I', n.nspname, c.relname)) AS lit,
  format('CREATE SEQUENCE %I.%I AS %s START WITH %s INCREMENT BY %s MINVALUE %s MAXVALUE %s CACHE %s%s;', n.nspname, c.relname,
    format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, CASE WHEN s.seqcycle THEN ' CYCLE' ELSE '' END) AS sql,
  EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'i') AS identity,
  (SELECT format('ALTER SEQUENCE %I.%I OWNED BY %I.%I.%I;', n.nspname, c.relname, tn.nspname, t.relname, a.attname)
   FROM pg_depend d JOIN pg_class t ON t.oid = d.refobjid JOIN pg_namespace tn ON tn.oid = t.relnamespace
   JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
   WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a') AS owned
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_sequence s ON s.seqrelid = c.oid
WHERE c.relkind = 'S' AND ${USER_NS} AND ${notMember('pg_class', 'c.oid')}
ORDER BY c.oid`

/** Tables (plain and partitioned) of the user schemas. */
const USER_TABLES = `
SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND ${USER_NS} AND ${notMember('pg_class', 'c.oid')}`

const TABLES_SQL = `
SELECT c.oid::text AS oid, c.relkind, format('%I.%I', n.nspname, c.relname) AS q, c.relpersistence = 'u' AS unlogged,
  c.relispartition AS partition,
  CASE WHEN c.relispartition THEN (SELECT format('%I.%I', pn.nspname, p.relname) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
    JOIN pg_namespace pn ON pn.oid = p.relnamespace WHERE i.inhrelid = c.oid) END AS partition_of,
  CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound,
  CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END AS partition_by,
  (SELECT string_agg(format('%I.%I', pn.nspname, p.relname), ', ' ORDER BY i.inhseqno) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
    JOIN pg_namespace pn ON pn.oid = p.relnamespace WHERE i.inhrelid = c.oid AND NOT c.relispartition) AS inherits,
  array_to_string(c.reloptions, ', ') AS options
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid IN (${USER_TABLES})
ORDER BY c.oid`

const COLUMNS_SQL = `
SELECT a.attrelid::text AS rel, format('%I', a.attname) AS col, format_type(a.atttypid, a.atttypmod) AS type,
  a.attnotnull AS notnull, a.attislocal AS local, nullif(a.attgenerated, '') AS generated, nullif(a.attidentity, '') AS identity,
  pg_get_expr(d.adbin, d.adrelid) AS def,
  CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
    THEN (SELECT format('%I.%I', cn.nspname, co.collname) FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace WHERE co.oid = a.attcollation) END AS coll,
  CASE WHEN a.attidentity <> '' THEN (
    SELECT format('SEQUENCE NAME %I.%I START WITH %s INCREMENT BY %s MINVALUE %s MAXVALUE %s CACHE %s%s', sn.nspname, sc.relname,
      s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, CASE WHEN s.seqcycle THEN ' CYCLE' ELSE '' END)
    FROM pg_depend dep JOIN pg_class sc ON sc.oid = dep.objid JOIN pg_namespace sn ON sn.oid = sc.relnamespace JOIN pg_sequence s ON s.seqrelid = sc.oid
    WHERE dep.classid = 'pg_class'::regclass AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid
      AND dep.refobjsubid = a.attnum AND dep.deptype = 'i' AND sc.relkind = 'S') END AS identity_options
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid IN (${USER_TABLES}) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum`

function tableDefinition(t: Row, columns: readonly Row[]): string {
  const unlogged = t.unlogged ? 'UNLOGGED ' : ''
  if (t.partition) {
    // A partition takes its columns from the parent; only the bound is its own.
    const by = t.partition_by ? ` PARTITION BY ${text(t.partition_by)}` : ''
    return `CREATE ${unlogged}TABLE ${text(t.q)} PARTITION OF ${text(t.partition_of)} ${text(t.bound)}${by};`
  }
  const lines = columns.filter((c) => c.local).map(columnDefinition)
  let sql = `CREATE ${unlogged}TABLE ${text(t.q)} (${lines.length ? `\n    ${lines.join(',\n    ')}\n` : ''})`
  if (t.inherits) sql += ` INHERITS (${text(t.inherits)})`
  if (t.partition_by) sql += ` PARTITION BY ${text(t.partition_by)}`
  if (t.options) sql += ` WITH (${text(t.options)})`
  return `${sql};`
}

function columnDefinition(c: Row): string {
  let sql = `${text(c.col)} ${text(c.type)}`
  if (c.coll) sql += ` COLLATE ${text(c.coll)}`
  if (c.generated) sql += ` GENERATED ALWAYS AS (${text(c.def)})${c.generated === 's' ? ' STORED' : ' VIRTUAL'}`
  else if (c.identity) sql += ` GENERATED ${c.identity === 'a' ? 'ALWAYS' : 'BY DEFAULT'} AS IDENTITY (${text(c.identity_options)})`
  else if (c.def !== null && c.def !== undefined) sql += ` DEFAULT ${text(c.def)}`
  if (c.notnull && !c.identity) sql += ' NOT NULL'
  return sql
}

const VIEWS_SQL = `
SELECT c.oid::text AS oid,
  format('CREATE %sVIEW %I.%I%s AS %s%s;', CASE c.relkind WHEN 'm' THEN 'MATERIALIZED ' ELSE '' END, n.nspname, c.relname,
    CASE WHEN c.reloptions IS NOT NULL THEN ' WITH (' || array_to_string(c.reloptions, ', ') || ')' ELSE '' END,
    regexp_replace(pg_get_viewdef(c.oid), ';\\s*$', ''),
    CASE c.relkind WHEN 'm' THEN E'\\n  WITH NO DATA' ELSE '' END) AS sql,
  CASE WHEN c.relkind = 'm' AND c.relispopulated THEN format('REFRESH MATERIALIZED VIEW %I.%I;', n.nspname, c.relname) END AS refresh
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'm') AND ${USER_NS} AND ${notMember('pg_class', 'c.oid')}
ORDER BY c.oid`

/**
 * Table constraints after the data: keys first, then checks, then foreign
 * keys (which need the keys). Inherited copies are left to the parent's
 * ALTER TABLE (no ONLY there), which re-makes them as Postgres did.
 */
const CONSTRAINTS_SQL = `
SELECT format('ALTER TABLE %s%I.%I ADD CONSTRAINT %I %s;', CASE WHEN t.relkind = 'p' OR c.contype = 'c' THEN '' ELSE 'ONLY ' END,
  n.nspname, t.relname, c.conname, pg_get_constraintdef(c.oid)) AS sql
FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE c.conrelid IN (${USER_TABLES}) AND c.contype IN ('p', 'u', 'x', 'c', 'f') AND c.conislocal AND c.conparentid = 0
ORDER BY CASE c.contype WHEN 'p' THEN 0 WHEN 'u' THEN 1 WHEN 'x' THEN 2 WHEN 'c' THEN 3 ELSE 4 END, t.oid, c.conname`

const INDEXES_SQL = `
SELECT CASE WHEN t.relkind = 'p' THEN regexp_replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ') ELSE pg_get_indexdef(i.indexrelid) END || ';' AS sql
FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE t.relkind IN ('r', 'p', 'm') AND ${USER_NS} AND ${notMember('pg_class', 't.oid')}
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x'))
  AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid)
ORDER BY i.indexrelid`

/** Triggers, then rules other than views' own. */
const TRIGGERS_SQL = `
SELECT pg_get_triggerdef(g.oid) || ';' || CASE WHEN g.tgenabled = 'D'
    THEN format(E'\\nALTER TABLE %I.%I DISABLE TRIGGER %I;', n.nspname, t.relname, g.tgname) ELSE '' END AS sql
FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE NOT g.tgisinternal AND g.tgparentid = 0 AND t.relkind IN ('r', 'p', 'v') AND ${USER_NS} AND ${notMember('pg_class', 't.oid')}
  -- A trigger on a session's temporary function (live queries') ends with the session.
  AND (SELECT pn.nspname FROM pg_proc p JOIN pg_namespace pn ON pn.oid = p.pronamespace WHERE p.oid = g.tgfoid) !~ '^pg_temp_'
UNION ALL
SELECT pg_get_ruledef(r.oid) AS sql
FROM pg_rewrite r JOIN pg_class t ON t.oid = r.ev_class JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE r.rulename <> '_RETURN' AND ${USER_NS} AND ${notMember('pg_class', 't.oid')}`

const POLICIES_SQL = `
SELECT format('ALTER TABLE %I.%I ENABLE ROW LEVEL SECURITY;', n.nspname, c.relname)
  || CASE WHEN c.relforcerowsecurity THEN format(E'\\nALTER TABLE %I.%I FORCE ROW LEVEL SECURITY;', n.nspname, c.relname) ELSE '' END AS sql
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid IN (${USER_TABLES}) AND c.relrowsecurity
UNION ALL
SELECT format('CREATE POLICY %I ON %I.%I AS %s FOR %s TO %s%s%s;', p.policyname, p.schemaname, p.tablename, p.permissive, p.cmd,
  (SELECT string_agg(CASE WHEN r = 'public' THEN 'PUBLIC' ELSE quote_ident(r) END, ', ') FROM unnest(p.roles) r),
  CASE WHEN p.qual IS NOT NULL THEN ' USING (' || p.qual || ')' ELSE '' END,
  CASE WHEN p.with_check IS NOT NULL THEN ' WITH CHECK (' || p.with_check || ')' ELSE '' END) AS sql
FROM pg_policies p JOIN pg_namespace n ON n.nspname = p.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
WHERE c.oid IN (${USER_TABLES})`

const COMMENTS_SQL = `
SELECT format('COMMENT ON %s %I.%I IS %L;', CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
  n.nspname, c.relname, d.description) AS sql
FROM pg_description d JOIN pg_class c ON c.oid = d.objoid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE d.classoid = 'pg_class'::regclass AND d.objsubid = 0 AND c.relkind IN ('r', 'p', 'v', 'm', 'S') AND ${USER_NS} AND ${notMember('pg_class', 'c.oid')}
UNION ALL
SELECT format('COMMENT ON COLUMN %I.%I.%I IS %L;', n.nspname, c.relname, a.attname, d.description)
FROM pg_description d JOIN pg_class c ON c.oid = d.objoid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid
WHERE d.classoid = 'pg_class'::regclass AND d.objsubid > 0 AND c.relkind IN ('r', 'p', 'v', 'm') AND ${USER_NS} AND ${notMember('pg_class', 'c.oid')}
UNION ALL
SELECT format('COMMENT ON %s %I.%I(%s) IS %L;', CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
  n.nspname, p.proname, pg_get_function_identity_arguments(p.oid), d.description)
FROM pg_description d JOIN pg_proc p ON p.oid = d.objoid JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE d.classoid = 'pg_proc'::regclass AND p.prokind IN ('f', 'p', 'w') AND ${USER_NS} AND ${notMember('pg_proc', 'p.oid')}
UNION ALL
SELECT format('COMMENT ON %s %I.%I IS %L;', CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, n.nspname, t.typname, d.description)
FROM pg_description d JOIN pg_type t ON t.oid = d.objoid JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE d.classoid = 'pg_type'::regclass AND t.typtype IN ('e', 'd', 'c', 'r') AND ${USER_NS} AND ${notMember('pg_type', 't.oid')}
UNION ALL
SELECT format('COMMENT ON SCHEMA %I IS %L;', n.nspname, d.description)
FROM pg_description d JOIN pg_namespace n ON n.oid = d.objoid
WHERE d.classoid = 'pg_namespace'::regclass AND ${USER_NS} AND n.nspname <> 'public' AND ${notMember('pg_namespace', 'n.oid')}`

/**
 * Edges "object needs object" among the definitions, from pg_depend: a
 * view's rule stands for the view, a column default for its table, a
 * domain's CHECK for the domain; a table's row type (or an array of it) for
 * the table, an extension's member for the extension. Partitions and
 * inheritance children need their parents.
 */
async function dependencyEdges(tx: Transaction, tables: readonly Row[]): Promise<[string, string][]> {
  const alias = new Map<string, string>()
  for (const r of await select(
    tx,
    `SELECT 'type:' || t.oid AS key,
       CASE WHEN c.relkind IS NOT NULL AND c.relkind <> 'c' THEN 'class:' || t.typrelid
            WHEN c.relkind = 'c' THEN 'type:' || t.oid
            WHEN t.typelem <> 0 AND t.typsubscript = 'array_subscript_handler'::regproc THEN 'type:' || t.typelem
            WHEN t.typtype = 'm' THEN (SELECT 'type:' || r.rngtypid FROM pg_range r WHERE r.rngmultitypid = t.oid) END AS target
     FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid WHERE t.oid >= 16384
     UNION ALL
     SELECT 'class:' || c.oid, 'type:' || c.reltype FROM pg_class c WHERE c.relkind = 'c' AND c.oid >= 16384
     UNION ALL
     SELECT CASE e.classid WHEN 'pg_type'::regclass THEN 'type:' WHEN 'pg_proc'::regclass THEN 'proc:' WHEN 'pg_class'::regclass THEN 'class:' END || e.objid,
       'ext:' || e.refobjid
     FROM pg_depend e WHERE e.deptype = 'e' AND e.classid IN ('pg_type'::regclass, 'pg_proc'::regclass, 'pg_class'::regclass)`,
  )) {
    if (r.target && r.target !== r.key) alias.set(text(r.key), text(r.target))
  }
  const resolve = (key: string): string => {
    // Arrays of row types resolve in two steps; bounded in case of a cycle.
    let k = key
    for (let i = 0; i < 4 && alias.has(k); i++) k = alias.get(k)!
    return k
  }
  const edges: [string, string][] = []
  for (const r of await select(
    tx,
    `SELECT DISTINCT
       CASE d.classid
         WHEN 'pg_class'::regclass THEN 'class:' || d.objid
         WHEN 'pg_type'::regclass THEN 'type:' || d.objid
         WHEN 'pg_proc'::regclass THEN 'proc:' || d.objid
         WHEN 'pg_rewrite'::regclass THEN (SELECT 'class:' || r.ev_class FROM pg_rewrite r WHERE r.oid = d.objid)
         WHEN 'pg_attrdef'::regclass THEN (SELECT 'class:' || a.adrelid FROM pg_attrdef a WHERE a.oid = d.objid)
         WHEN 'pg_constraint'::regclass THEN (SELECT 'type:' || c.contypid FROM pg_constraint c WHERE c.oid = d.objid AND c.contypid <> 0)
       END AS obj,
       CASE d.refclassid
         WHEN 'pg_class'::regclass THEN 'class:' || d.refobjid
         WHEN 'pg_type'::regclass THEN 'type:' || d.refobjid
         WHEN 'pg_proc'::regclass THEN 'proc:' || d.refobjid
         WHEN 'pg_namespace'::regclass THEN 'ns:' || d.refobjid
         WHEN 'pg_extension'::regclass THEN 'ext:' || d.refobjid
       END AS ref
     FROM pg_depend d WHERE d.deptype = 'n' AND d.objid >= 16384 AND d.refobjid >= 16384`,
  )) {
    if (r.obj && r.ref) edges.push([resolve(text(r.obj)), resolve(text(r.ref))])
  }
  const byName = new Map(tables.map((t) => [text(t.q), `class:${text(t.oid)}`]))
  for (const t of tables) {
    for (const parent of [t.partition_of, ...text(t.inherits).split(', ')]) {
      const key = parent ? byName.get(text(parent)) : undefined
      if (key) edges.push([`class:${text(t.oid)}`, key])
    }
  }
  return edges
}

/**
 * Orders definitions so that each comes after what it needs; among those
 * free to go, by kind (schemas, extensions, types, sequences, functions,
 * tables, views) then creation order. A cycle (possible only through
 * objects this dump does not know) is broken in that same order.
 */
function orderByDependencies(defs: readonly Definition[], edges: readonly [string, string][]): Definition[] {
  const byKey = new Map(defs.map((d) => [d.key, d]))
  const needs = new Map<string, Set<string>>()
  const neededBy = new Map<string, string[]>()
  for (const [obj, ref] of edges) {
    if (obj === ref || !byKey.has(obj) || !byKey.has(ref)) continue
    const set = needs.get(obj) ?? new Set<string>()
    if (set.has(ref)) continue
    set.add(ref)
    needs.set(obj, set)
    neededBy.set(ref, [...(neededBy.get(ref) ?? []), obj])
  }
  const before = (a: Definition, b: Definition): number => a.rank - b.rank || a.oid - b.oid
  const pending = new Set(defs.map((d) => d.key))
  const out: Definition[] = []
  while (pending.size > 0) {
    let next: Definition | undefined
    for (const key of pending) {
      const def = byKey.get(key)!
      if ((needs.get(key)?.size ?? 0) > 0) continue
      if (!next || before(def, next) < 0) next = def
    }
    // Nothing is free: a cycle; take the earliest and go on.
    next ??= [...pending].map((k) => byKey.get(k)!).sort(before)[0]!
    pending.delete(next.key)
    out.push(next)
    for (const dependent of neededBy.get(next.key) ?? []) needs.get(dependent)?.delete(next.key)
  }
  return out
}
