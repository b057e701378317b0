import type { EngineLease } from '@pgwasm/pglite'
import { queryMessage, readRows } from '../wire/wire.js'
import { isClientSetting, type ClientSettings } from './session-settings.js'

/*
 * `ALTER ROLE ... SET`, `ALTER DATABASE ... SET` and `ALTER ROLE ... IN
 * DATABASE ... SET` apply to the sessions that start after them. The
 * engine's one session started long before most clients log in, so each
 * client gets them as its own settings at its first batch, under its
 * startup parameters, with PostgreSQL's precedence: every role's and every
 * database's, then its database's, then its role's, then its role's in its
 * database, then what its startup packet asks for.
 */

/** The rows for this database and for all: the role (empty: every role), whether it is this database's, and `name=value` entries. */
const STORED = queryMessage(
  `select coalesce(r.rolname::text, ''), (s.setdatabase <> 0)::text, pg_catalog.array_to_json(s.setconfig)::text ` +
    `from pg_catalog.pg_db_role_setting s left join pg_catalog.pg_roles r on r.oid = s.setrole ` +
    `where s.setdatabase = 0 or s.setdatabase = (select oid from pg_catalog.pg_database where datname = pg_catalog.current_database())`,
)

interface Stored {
  readonly role: string
  readonly inDatabase: boolean
  readonly entries: readonly (readonly [string, string])[]
}

/** Precedence, lowest first: for all, this database's, the role's, the role's in this database. */
function rank(row: Stored): number {
  return (row.role === '' ? 0 : 2) + (row.inDatabase ? 1 : 0)
}

/** What the engine stores of such settings, read again only after the catalog changed (`EngineLease.catalogChanges`). */
export class LoginSettings {
  #read: { readonly catalog: number; readonly rows: readonly Stored[] } | undefined

  /**
   * `startup` (a client's startup settings) under the stored settings that
   * apply to `user` in this database; `startup` itself when none do.
   */
  forLogin(lease: EngineLease, user: string, startup: ClientSettings): ClientSettings {
    const rows = this.#rows(lease).filter((row) => row.role === '' || row.role === user)
    if (rows.length === 0) return startup
    const merged = new Map<string, string>()
    for (const row of rows.sort((a, b) => rank(a) - rank(b))) for (const [name, value] of row.entries) merged.set(name, value)
    for (const [name, value] of startup) merged.set(name, value)
    return merged
  }

  #rows(lease: EngineLease): readonly Stored[] {
    if (this.#read?.catalog === lease.catalogChanges) return this.#read.rows
    const found = readRows(lease, STORED)
    // Not kept: read again at the next login.
    if (!found) return []
    const rows: Stored[] = []
    for (const [role, inDatabase, config] of found) {
      const entries: [string, string][] = []
      for (const entry of JSON.parse(config || '[]') as string[]) {
        const eq = entry.indexOf('=')
        const name = entry.slice(0, eq).toLowerCase()
        // Who a client is stays the server's to say, as for its startup parameters.
        if (eq > 0 && isClientSetting(name)) entries.push([name, entry.slice(eq + 1)])
      }
      rows.push({ role: role!, inDatabase: inDatabase === 'true', entries })
    }
    this.#read = { catalog: lease.catalogChanges, rows }
    return rows
  }
}
