import type { LiveDb } from './types.js'

/** A relation a plan reads, as EXPLAIN names it. */
interface PlanRelation {
  schema: string
  name: string
}

/**
 * The OIDs of the tables `sql` reads, from its plan: views are already
 * expanded to their base tables there, and subqueries and CTEs appear as
 * child plans. A partition or partitioned table stands for its whole
 * partition tree, since a write through the parent fires only the parent's
 * statement triggers and plan-time pruning hides partitions the same query
 * reads with other parameters.
 *
 * Tables read only inside functions the planner does not inline are not
 * seen (as with PGlite's view-based discovery).
 */
export async function tablesOf(db: LiveDb, sql: string, params: readonly unknown[]): Promise<number[]> {
  // VERBOSE adds "Schema"; without it the name alone could be a temp table's shadow.
  const { rows } = await db.query<[unknown]>(`EXPLAIN (VERBOSE, FORMAT JSON) ${sql}`, params, { rowMode: 'array' })
  const found = new Map<string, PlanRelation>()
  for (const row of rows) collectRelations(row[0], found)
  if (found.size === 0) return []
  const relations = [...found.values()]
  const resolved = await db.query<[number, boolean]>(
    `SELECT c.oid::int, c.relkind = 'p' OR c.relispartition
       FROM unnest($1::text[], $2::text[]) AS f(nsp, rel)
       JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(pg_catalog.format('%I.%I', f.nsp, f.rel))
      WHERE c.relkind IN ('r', 'p')`,
    [relations.map((r) => r.schema), relations.map((r) => r.name)],
    { rowMode: 'array' },
  )
  const tables = new Set(resolved.rows.map((r) => r[0]))
  const partitioned = resolved.rows.filter((r) => r[1]).map((r) => r[0])
  // A separate step: the tree functions make the planner scan pg_class, which most queries need not pay for.
  if (partitioned.length > 0) {
    const trees = await db.query<[number]>(
      `SELECT t.relid::int FROM unnest($1::oid[]) AS o(oid)
         CROSS JOIN LATERAL pg_catalog.pg_partition_tree(coalesce(pg_catalog.pg_partition_root(o.oid), o.oid)) t`,
      [partitioned],
      { rowMode: 'array' },
    )
    for (const [oid] of trees.rows) tables.add(oid)
  }
  return [...tables].sort((a, b) => a - b)
}

/** Walks an EXPLAIN (FORMAT JSON) document for every "Relation Name". */
function collectRelations(node: unknown, found: Map<string, PlanRelation>): void {
  if (Array.isArray(node)) {
    for (const item of node) collectRelations(item, found)
    return
  }
  if (node === null || typeof node !== 'object') return
  const plan = node as Record<string, unknown>
  const name = plan['Relation Name']
  const schema = plan['Schema']
  if (typeof name === 'string' && typeof schema === 'string') found.set(`${schema}\u0000${name}`, { schema, name })
  if (plan['Plan'] !== undefined) collectRelations(plan['Plan'], found)
  if (plan['Plans'] !== undefined) collectRelations(plan['Plans'], found)
}
