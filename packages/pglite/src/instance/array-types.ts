import { ARRAY_TYPES_SQL, type ArrayTypeRow } from '../engine/start/template.js'
import type { QueryRunner } from '../query/runner.js'
import { makeArrayParser, serializeArray, type Parser, type Serializer } from '../types/index.js'

export function readArrayTypes(runner: QueryRunner): ArrayTypeRow[] {
  return runner.query(ARRAY_TYPES_SQL, [], { rowMode: 'array' }).rows as unknown as ArrayTypeRow[]
}

/** Adds parsers and serializers for the catalog's array types (`known`: skip the query). Returns the rows used. */
export function registerArrayTypes(
  runner: QueryRunner,
  parsers: Record<number, Parser>,
  serializers: Record<number, Serializer>,
  known?: readonly ArrayTypeRow[],
): readonly ArrayTypeRow[] {
  const rows = known ?? readArrayTypes(runner)
  for (const row of rows) {
    const [elem, arr, delim] = row
    if (!parsers[arr]) parsers[arr] = makeArrayParser(parsers[elem], elem, delim)
    if (!serializers[arr]) {
      const element = serializers[elem]
      serializers[arr] = (value: unknown) => (Array.isArray(value) ? serializeArray(value, element, delim) : String(value))
    }
  }
  runner.parsersChanged()
  return rows
}

/** The array types saved beside a state, or undefined when the note is missing or not a list of rows. */
export function parseArrayTypes(note: string | undefined): readonly ArrayTypeRow[] | undefined {
  if (note === undefined) return undefined
  try {
    const rows: unknown = JSON.parse(note)
    const valid =
      Array.isArray(rows) &&
      rows.every((r: unknown) => Array.isArray(r) && r.length === 3 && typeof r[0] === 'number' && typeof r[1] === 'number' && typeof r[2] === 'string')
    return valid ? (rows as ArrayTypeRow[]) : undefined
  } catch {
    return undefined
  }
}

/** The catalog's array types as a note for the next open, or undefined when the query fails. */
export function arrayTypesNote(runner: QueryRunner): string | undefined {
  try {
    return JSON.stringify(readArrayTypes(runner))
  } catch {
    return undefined
  }
}
