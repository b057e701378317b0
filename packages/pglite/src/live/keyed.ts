import type { Field } from '../query/results.js'
import { sharedQuery } from './shared.js'
import { diffRows, EMPTY_STATE, mergeRows, type ChangeRow, type ChangesState } from './diff.js'
import { Subscription, type LiveContext } from './subscription.js'
import type { LiveQueryResults, Row } from './types.js'

/** The column names of a run, checking that the key is one of them. */
function columnsOf(fields: readonly Field[], key: string): string[] {
  const columns = fields.map((f) => f.name)
  if (!columns.includes(key)) throw new Error(`the key column "${key}" is not in the query's results (${columns.join(', ')})`)
  return columns
}

/** Keeps the previous fields array when the columns did not change, so results compare by identity. */
function sameFields(a: readonly Field[], b: readonly Field[]): boolean {
  return a.length === b.length && a.every((f, i) => f.name === b[i]!.name && f.dataTypeID === b[i]!.dataTypeID)
}

/**
 * `live.incrementalQuery()`: the results matched by key with the previous
 * ones, keeping unchanged row objects (and the whole results object when
 * nothing changed).
 */
export class IncrementalLiveQuery<T> extends Subscription<LiveQueryResults<T>> {
  readonly #key: string
  #rows: { rows: readonly Row[]; byKey: Map<unknown, Row> } = { rows: [], byKey: new Map() }
  #results: LiveQueryResults<T> | undefined

  constructor(
    ctx: LiveContext,
    sql: string,
    params: readonly unknown[],
    key: string,
    callback: ((results: LiveQueryResults<T>) => void) | undefined,
  ) {
    super(ctx, sql, params, callback)
    this.#key = key
  }

  protected async run(): Promise<LiveQueryResults<T>> {
    const result = await sharedQuery<Row>(this.ctx.db, this.sql, this.params)
    const columns = columnsOf(result.fields, this.#key)
    const merged = mergeRows(this.#rows, result.rows, this.#key, columns)
    const previous = this.#results
    const fieldsKept = previous !== undefined && sameFields(previous.fields, result.fields)
    if (previous && fieldsKept && !merged.changed) return previous
    this.#rows = merged
    this.#results = { rows: merged.rows as unknown as T[], fields: fieldsKept ? previous!.fields : result.fields }
    return this.#results
  }
}

/** `live.changes()`: what changed by key since the last run. */
export class ChangesLiveQuery extends Subscription<ChangeRow[]> {
  readonly #key: string
  #state: ChangesState = EMPTY_STATE
  /** The columns of the last run. */
  fields: { name: string; dataTypeID: number }[] = []

  constructor(
    ctx: LiveContext,
    sql: string,
    params: readonly unknown[],
    key: string,
    callback: ((changes: ChangeRow[]) => void) | undefined,
  ) {
    super(ctx, sql, params, callback)
    this.#key = key
  }

  protected async run(): Promise<ChangeRow[]> {
    const result = await sharedQuery<Row>(this.ctx.db, this.sql, this.params)
    const columns = columnsOf(result.fields, this.#key)
    const { changes, state } = diffRows(this.#state, result.rows, this.#key, columns)
    this.#state = state
    this.fields = result.fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID }))
    return changes
  }
}
