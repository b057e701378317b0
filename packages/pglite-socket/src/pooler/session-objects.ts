import type { EngineLease } from '@pgwasm/pglite'
import type { OthersObjects } from '../sql/own-scope.js'
import { mentionsAny } from '../sql/byte-scan.js'
import { quoteIdent } from '../sql/quoting.js'
import { dropTempRelations, RELATION_KIND } from '../sql/temp-relations.js'
import { concat, queryMessage, readRows } from '../wire/wire.js'

/**
 * Temporary relations, WITH HOLD cursors and SQL-level `PREPARE`d
 * statements live in the one engine session, not in a client's. Each is
 * noted as its client's when that client's batch made it, and dropped when
 * the client disconnects, as a PostgreSQL backend's go with it. A client's
 * temporary relations go by their names only while it holds the engine:
 * when another client takes it, they are renamed out of the way (hidden),
 * so that each client sees its own `foo` and may make one while another
 * client has one. Cursors and SQL-prepared statements stay visible to the
 * other clients: the engine has one portal and statement namespace (see
 * the README).
 */

/** Relations in the session's temporary schema, holdable cursors and SQL-prepared statements, one key each. */
const READ = queryMessage(
  `select 'r' || c.oid::text from pg_catalog.pg_class c where c.relnamespace = pg_catalog.pg_my_temp_schema() ` +
    `and c.relkind in ('r', 'p', 'v', 'm', 'S', 'f', 'i', 'I') ` +
    `union all select 'c' || name from pg_catalog.pg_cursors where is_holdable ` +
    `union all select 's' || name from pg_catalog.pg_prepared_statements where from_sql`,
)

/**
 * Whether SQL in `bytes[from, to)` may make or drop a temporary relation,
 * a cursor or an SQL-prepared statement (a byte scan: a false positive costs one
 * catalog read after the batch). Objects made inside a function's dynamic
 * SQL are not seen: they stay until the engine's session ends.
 */
export function sessionObjectsMayChange(bytes: Uint8Array, from: number, to: number): boolean {
  return mentionsAny(bytes, from, to, SESSION_OBJECT_WORDS)
}

/** Words of SQL that makes or drops such objects; dropped ones too, so that a name its owner closed does not stay its owner's. */
const SESSION_OBJECT_WORDS = ['temp', 'temporary', 'pg_temp', 'declare', 'prepare', 'close', 'deallocate']

/** Who made each session-wide object, among the clients of one multiplexer. */
export class SessionObjects<Client> {
  /** Object key -> the client that made it (undefined: made outside any client's batch). */
  readonly #owners = new Map<string, Client | undefined>()
  /** In-process callers may have made or dropped objects since the last read. */
  #stale = true
  /** The client whose temporary relations go by their own names now. */
  #shown: Client | undefined
  /** Relations renamed out of the way while their client waits: oid -> its client, kind and own name. */
  readonly #hidden = new Map<string, { owner: Client; kind: string; name: string }>()

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
    for (const key of this.#owners.keys()) {
      if (keys.has(key)) continue
      this.#owners.delete(key)
      this.#hidden.delete(key.slice(1))
    }
    for (const key of keys) if (!this.#owners.has(key)) this.#owners.set(key, client)
    this.#stale = false
  }

  /**
   * Notes object `key` (`s` and an SQL-prepared statement's name) as
   * `client`'s as it is made, when no one holds that key: it then goes
   * with the client even if no catalog read after the batch succeeds. A
   * read that succeeds corrects it (one that was not made is forgotten).
   */
  claim(key: string, client: Client): void {
    if (!this.#owners.has(key)) this.#owners.set(key, client)
  }

  /** Whether `name` is a held cursor that `client` did not make (another client's, or an in-process caller's). */
  isOthersCursor(name: string, client: Client): boolean {
    const key = `c${name}`
    return this.#owners.has(key) && this.#owners.get(key) !== client
  }

  /** What clients other than `client` made: a statement of `client` that acts on the whole session leaves it (own-scope.ts). */
  othersOf(client: Client): OthersObjects {
    const others = { relations: [] as string[], cursors: [] as string[], statements: [] as string[] }
    for (const [key, owner] of this.#owners) {
      if (owner === client || owner === undefined) continue
      const list = key[0] === 'r' ? others.relations : key[0] === 'c' ? others.cursors : others.statements
      list.push(key.slice(1))
    }
    return others
  }

  /**
   * Before a batch of `client` that takes the engine from another client
   * (outside any transaction block): the temporary relations of the client
   * shown so far are renamed out of the way, and `client`'s get their own
   * names back. True when a name changed (SQL may resolve differently).
   */
  switchTo(lease: EngineLease, client: Client): boolean {
    if (this.#shown === client) return false
    const previous = this.#shown
    this.#shown = client
    const hid = previous !== undefined && this.#hide(lease, previous)
    return this.#show(lease, client) || hid
  }

  #hide(lease: EngineLease, owner: Client): boolean {
    const oids: string[] = []
    for (const [key, who] of this.#owners) if (who === owner && key[0] === 'r' && !this.#hidden.has(key.slice(1))) oids.push(key.slice(1))
    if (oids.length === 0) return false
    // Names as they are now (the client may have renamed its own), and with
    // them what was made on its tables by SQL that did not say temp: indexes,
    // and views (Postgres makes a view on a temporary table temporary).
    const set = `'{${oids.join(',')}}'::oid[]`
    const rows = readRows(
      lease,
      queryMessage(
        `select c.oid::text, c.relkind::text, c.relname::text from pg_catalog.pg_class c ` +
          `where c.relnamespace = pg_catalog.pg_my_temp_schema() and (c.oid = any (${set}) ` +
          `or c.oid in (select i.indexrelid from pg_catalog.pg_index i where i.indrelid = any (${set})) ` +
          `or c.oid in (select r.ev_class from pg_catalog.pg_depend d join pg_catalog.pg_rewrite r on r.oid = d.objid ` +
          `where d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass and d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass ` +
          `and d.refobjid = any (${set})))`,
      ),
    )
    if (!rows || rows.length === 0) return false
    const list = rows
      .map(([oid, kind, name]) => ({ oid: oid!, kind: kind!, from: name!, to: hiddenName(oid!) }))
      .filter(({ oid }) => {
        const who = this.#owners.get(`r${oid}`)
        if (who !== undefined && who !== owner) return false
        this.#owners.set(`r${oid}`, owner)
        return !this.#hidden.has(oid)
      })
    if (list.length === 0) return false
    lease.execProtocolRawStream(renames(list), () => {})
    for (const { oid, kind, from } of list) this.#hidden.set(oid, { owner, kind, name: from })
    return true
  }

  #show(lease: EngineLease, owner: Client): boolean {
    const list: { kind: string; from: string; to: string }[] = []
    for (const [oid, hidden] of this.#hidden) {
      if (hidden.owner !== owner) continue
      this.#hidden.delete(oid)
      list.push({ kind: hidden.kind, from: hiddenName(oid), to: hidden.name })
    }
    if (list.length === 0) return false
    lease.execProtocolRawStream(renames(list), () => {})
    return true
  }

  /**
   * The messages that drop what `client` made (each its own Query, so one
   * that is gone already does not stop the others), and forgets them; empty
   * when it made nothing.
   */
  takeCleanup(client: Client): Uint8Array {
    if (this.#shown === client) this.#shown = undefined
    for (const [oid, hidden] of this.#hidden) if (hidden.owner === client) this.#hidden.delete(oid)
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
  const rows = readRows(lease, READ)
  return rows && new Set(rows.map((row) => row[0]!))
}

/** What a waiting client's relation is called meanwhile: its oid makes the name unique. */
const hiddenName = (oid: string): string => `pgwasm_hidden_${oid}`

/** Each rename its own Query: one that fails (its name was taken meanwhile) does not stop the others. */
function renames(list: readonly { kind: string; from: string; to: string }[]): Uint8Array {
  return concat(list.map(({ kind, from, to }) => queryMessage(`ALTER ${RELATION_KIND[kind] ?? 'TABLE'} pg_temp.${quoteIdent(from)} RENAME TO ${quoteIdent(to)}`)))
}

function dropRelations(oids: readonly string[]): string {
  return `DO $pgwasm$ DECLARE r record; BEGIN ${dropTempRelations(`c.oid = ANY ('{${oids.join(',')}}'::oid[])`)}END $pgwasm$`
}
