import type { EngineLease } from '@pgwasm/pglite'
import { mentions } from './unnamed-cache.js'
import { concat, decodeUtf8, forEachFrame, queryMessage, quoteIdent, readInt32 } from './wire.js'

/**
 * Temporary relations, WITH HOLD cursors and SQL-level `PREPARE`d
 * statements live in the one engine session, not in a client's. Each is
 * noted as its client's when that client's batch made it, and dropped when
 * the client disconnects, as a PostgreSQL backend's go with it. They stay
 * visible to the other clients meanwhile: the engine has one temporary
 * schema and one portal and statement namespace (see the README).
 */

/** Relations in the session's temporary schema, holdable cursors and SQL-prepared statements, one key each. */
const READ = queryMessage(
  `select 'r' || c.oid::text from pg_catalog.pg_class c where c.relnamespace = pg_catalog.pg_my_temp_schema() ` +
    `and c.relkind in ('r', 'p', 'v', 'm', 'S', 'f') ` +
    `union all select 'c' || name from pg_catalog.pg_cursors where is_holdable ` +
    `union all select 's' || name from pg_catalog.pg_prepared_statements where from_sql`,
)

/**
 * Whether SQL in `bytes[from, to)` may make a temporary relation, a cursor
 * or an SQL-prepared statement (a byte scan: a false positive costs one
 * catalog read after the batch). Objects made inside a function's dynamic
 * SQL are not seen: they stay until the engine's session ends.
 */
export function sessionObjectsMayChange(bytes: Uint8Array, from: number, to: number): boolean {
  return (
    mentions(bytes, from, to, 'temp') ||
    mentions(bytes, from, to, 'temporary') ||
    mentions(bytes, from, to, 'pg_temp') ||
    mentions(bytes, from, to, 'declare') ||
    mentions(bytes, from, to, 'prepare')
  )
}

/** Who made each session-wide object, among the clients of one multiplexer. */
export class SessionObjects<Client> {
  /** Object key -> the client that made it (undefined: made outside any client's batch). */
  readonly #owners = new Map<string, Client | undefined>()
  /** In-process callers may have made or dropped objects since the last read. */
  #stale = true

  /** The engine went to in-process callers and back: what exists now is nobody's until read again. */
  markStale(): void {
    this.#stale = true
  }

  /** Before a batch that may make objects, at a Sync point: objects nobody noted yet are not this batch's. */
  before(lease: EngineLease): void {
    if (this.#stale) this.#read(lease, undefined)
  }

  /** After that batch, at a Sync point: objects that are new are `client`'s. */
  after(lease: EngineLease, client: Client): void {
    this.#read(lease, client)
  }

  #read(lease: EngineLease, client: Client | undefined): void {
    const keys = readKeys(lease)
    // An aborted transaction block cannot read the catalog: noted after a later batch.
    if (!keys) return
    for (const key of this.#owners.keys()) if (!keys.has(key)) this.#owners.delete(key)
    for (const key of keys) if (!this.#owners.has(key)) this.#owners.set(key, client)
    this.#stale = false
  }

  /**
   * The messages that drop what `client` made (each its own Query, so one
   * that is gone already does not stop the others), and forgets them; empty
   * when it made nothing.
   */
  takeCleanup(client: Client): Uint8Array {
    const relations: string[] = []
    const sql: string[] = []
    for (const [key, owner] of this.#owners) {
      if (owner !== client) continue
      this.#owners.delete(key)
      const name = key.slice(1)
      if (key[0] === 'r') relations.push(name)
      else sql.push(`${key[0] === 'c' ? 'CLOSE' : 'DEALLOCATE'} ${quoteIdent(name)}`)
    }
    // By oid, and only in the session's own temporary schema: a name could mean another relation by now.
    if (relations.length > 0) sql.push(dropRelations(relations))
    return concat(sql.map((text) => queryMessage(text)))
  }
}

function readKeys(lease: EngineLease): Set<string> | undefined {
  const chunks: Uint8Array[] = []
  lease.execProtocolRawStream(READ, (bytes) => chunks.push(bytes.slice()))
  const reply = concat(chunks)
  const keys = new Set<string>()
  let failed = false
  forEachFrame(reply, (type, start) => {
    // DataRow: one column, its length, then the text.
    if (type === 0x44) keys.add(decodeUtf8(reply.subarray(start + 6, start + 6 + readInt32(reply, start + 2))))
    else if (type === 0x45) failed = true
  })
  return failed ? undefined : keys
}

function dropRelations(oids: readonly string[]): string {
  return (
    `DO $pgwasm$ DECLARE r record; BEGIN ` +
    `FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_catalog.pg_class c ` +
    `WHERE c.oid = ANY ('{${oids.join(',')}}'::oid[]) AND c.relnamespace = pg_catalog.pg_my_temp_schema() LOOP ` +
    `BEGIN EXECUTE pg_catalog.format('DROP %s IF EXISTS %s CASCADE', ` +
    `CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, r.name); ` +
    `EXCEPTION WHEN OTHERS THEN NULL; END; END LOOP; END $pgwasm$`
  )
}
