import type { PGlite } from '../pglite.js'

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
export async function tablesOf(db: PGlite, sql: string, params: readonly unknown[]): Promise<number[]> {
  // VERBOSE adds "Schema"; without it the name alone could be a temp table's shadow.
  const { rows } = await db.query<[unknown]>(`EXPLAIN (VERBOSE, FORMAT JSON) ${sql}`, params, { rowMode: 'array' })
  const found = new Map<string, PlanRelation>()
  for (const row of rows) collectRelations(row[0], found)
  if (found.size === 0) return []
  const relations = [...found.values()]
  const result = await db.query<[number]>(
    `SELECT DISTINCT c.oid::int
       FROM unnest($1::text[], $2::text[]) AS f(nsp, rel)
       CROSS JOIN LATERAL (SELECT pg_catalog.to_regclass(pg_catalog.format('%I.%I', f.nsp, f.rel)) AS oid) r
       LEFT JOIN LATERAL pg_catalog.pg_partition_tree(coalesce(pg_catalog.pg_partition_root(r.oid), r.oid)) t ON true
       JOIN pg_catalog.pg_class c ON c.oid = coalesce(t.relid, r.oid)
      WHERE c.relkind IN ('r', 'p')`,
    [relations.map((r) => r.schema), relations.map((r) => r.name)],
    { rowMode: 'array' },
  )
  return result.rows.map((r) => r[0]).sort((a, b) => a - b)
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
