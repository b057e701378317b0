import type { Row } from './types.js'

/**
 * Whether two parsed column values are the same, as `IS NOT DISTINCT FROM`
 * would say of the text they came from: deep for arrays, JSON and bytes,
 * by time for dates, NaN equal to NaN.
 */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return typeof a === 'number' && typeof b === 'number' && a !== a && b !== b
  }
  if (a instanceof Date) return b instanceof Date && sameValue(a.getTime(), b.getTime())
  if (ArrayBuffer.isView(a)) {
    if (!ArrayBuffer.isView(b) || a.byteLength !== b.byteLength) return false
    const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
    const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false
    return true
  }
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!sameValue(a[i], b[i])) return false
    return true
  }
  if (Array.isArray(b) || b instanceof Date || ArrayBuffer.isView(b)) return false
  const ka = Object.keys(a)
  if (ka.length !== Object.keys(b).length) return false
  for (const k of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, k)) return false
    if (!sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false
  }
  return true
}

/**
 * A Map key for a key column's value: primitives as they are, objects
 * (dates, bytes, arrays) by content, since two parses never share identity.
 */
export function mapKey(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  if (value instanceof Date) return `\u0000date:${value.getTime()}`
  if (ArrayBuffer.isView(value)) {
    const bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
    let hex = ''
    for (const byte of bytes) hex += byte.toString(16).padStart(2, '0')
    return `\u0000bytes:${hex}`
  }
  return `\u0000json:${JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))}`
}

/** Whether every column of two rows is the same. */
export function sameRow(a: Row, b: Row, columns: readonly string[]): boolean {
  for (const column of columns) if (!sameValue(a[column], b[column])) return false
  return true
}

/** A change as `changes()` sends it (see the public `Change` type). */
export type ChangeRow = Row & { __op__: 'INSERT' | 'UPDATE' | 'DELETE'; __after__: unknown; __changed_columns__: string[] }

/** The rows of one run of a `changes()` query, with what is needed to diff the next. */
export interface ChangesState {
  rows: readonly Row[]
  byKey: Map<unknown, { row: Row; after: unknown }>
}

/** The state of a query with no rows yet: the first diff inserts everything. */
export const EMPTY_STATE: ChangesState = { rows: [], byKey: new Map() }

/**
 * What changed between two runs, by `key`, shaped as PGlite's live extension
 * sends it: inserts (in result order), then deletes, then updates.
 * `__after__` is the key of the row before (null for the first); a row that
 * only moved is an update of `__after__`.
 */
export function diffRows(
  prev: ChangesState,
  rows: readonly Row[],
  key: string,
  columns: readonly string[],
): { changes: ChangeRow[]; state: ChangesState } {
  const byKey: ChangesState['byKey'] = new Map()
  const inserts: ChangeRow[] = []
  const updates: ChangeRow[] = []
  let after: unknown = null
  for (const row of rows) {
    const keyValue = row[key]
    const k = mapKey(keyValue)
    byKey.set(k, { row, after })
    const old = prev.byKey.get(k)
    if (!old) {
      inserts.push({ __op__: 'INSERT', ...row, __after__: after, __changed_columns__: [] })
    } else {
      const changed: string[] = []
      const update: Row = { __op__: 'UPDATE' }
      for (const column of columns) {
        if (column === key) update[column] = keyValue
        else if (sameValue(old.row[column], row[column])) update[column] = null
        else {
          update[column] = row[column]
          changed.push(column)
        }
      }
      const moved = !sameValue(old.after, after)
      if (moved) changed.push('__after__')
      update.__after__ = moved ? after : null
      update.__changed_columns__ = changed
      if (changed.length > 0) updates.push(update as ChangeRow)
    }
    after = keyValue
  }
  const deletes: ChangeRow[] = []
  for (const [k, { row }] of prev.byKey) {
    if (byKey.has(k)) continue
    const change: Row = { __op__: 'DELETE' }
    for (const column of columns) change[column] = column === key ? row[column] : null
    change.__after__ = null
    change.__changed_columns__ = []
    deletes.push(change as ChangeRow)
  }
  return { changes: [...inserts, ...deletes, ...updates], state: { rows, byKey } }
}

/**
 * The rows of a new run of an incremental query: a row equal to the one of
 * the same key last time is that old object, and with nothing changed the
 * old array comes back, so callers can compare by identity.
 */
export function mergeRows(
  prev: { rows: readonly Row[]; byKey: Map<unknown, Row> },
  rows: readonly Row[],
  key: string,
  columns: readonly string[],
): { rows: Row[]; byKey: Map<unknown, Row>; changed: boolean } {
  const byKey = new Map<unknown, Row>()
  // A new array: the run's own may be shared with other live queries.
  const merged = new Array<Row>(rows.length)
  let changed = rows.length !== prev.rows.length
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    const k = mapKey(row[key])
    const old = prev.byKey.get(k)
    const kept = old !== undefined && sameRow(old, row, columns) ? old : row
    merged[i] = kept
    byKey.set(k, kept)
    if (!changed && prev.rows[i] !== kept) changed = true
  }
  return changed ? { rows: merged, byKey, changed } : { rows: prev.rows as Row[], byKey: prev.byKey, changed }
}
