import type { LiveDb } from './types.js'
import type { Results } from '../query/results.js'

/** Queries asked for in the current microtask wave, by database and SQL + parameters. */
const waves = new WeakMap<LiveDb, Map<string, Promise<Results<unknown>>>>()

/**
 * Runs `sql` once for every live query asking for it (same parameters) in
 * the same microtask wave: the refreshes that one commit's notices start.
 *
 * Sharing is safe because the wave ends (a microtask queued at its first
 * query) before anything queued after that query runs: every sharer was
 * started by a write that had already run when the shared query was issued,
 * and the queue runs it after them.
 *
 * Each sharer gets its own `rows` array; the row objects are shared, as they
 * are among a live query's callbacks.
 */
export function sharedQuery<T>(db: LiveDb, sql: string, params: readonly unknown[]): Promise<Results<T>> {
  const key = queryKey(sql, params)
  if (key === undefined) return db.query<T>(sql, params)
  let wave = waves.get(db)
  if (!wave) {
    const fresh = new Map<string, Promise<Results<unknown>>>()
    waves.set(db, (wave = fresh))
    queueMicrotask(() => {
      if (waves.get(db) === fresh) waves.delete(db)
    })
  }
  const running = wave.get(key) as Promise<Results<T>> | undefined
  if (running) return running.then((results) => ({ ...results, rows: results.rows.slice() }))
  const query = db.query<T>(sql, params)
  wave.set(key, query)
  return query
}

/** SQL and parameters as one string; undefined for parameters that cannot be compared so (never shared). */
function queryKey(sql: string, params: readonly unknown[]): string | undefined {
  if (params.length === 0) return sql
  try {
    return `${sql}\u0000${JSON.stringify(params, paramReplacer)}`
  } catch {
    return undefined
  }
}

function paramReplacer(this: unknown, key: string, value: unknown): unknown {
  // JSON.stringify has already called Date#toJSON here; the holder still has the Date.
  const original = (this as Record<string, unknown>)[key]
  if (original instanceof Date) return `\u0000date:${original.getTime()}`
  if (typeof value === 'bigint') return `\u0000bigint:${value}`
  if (ArrayBuffer.isView(value)) return `\u0000bytes:${Array.from(new Uint8Array(value.buffer, value.byteOffset, value.byteLength)).join(',')}`
  if (value === undefined) return '\u0000undefined'
  return value
}
