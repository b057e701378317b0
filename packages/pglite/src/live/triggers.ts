import type { PGlite } from '../pglite.js'

/** The NOTIFY channel of every watched table; the payload is the table's OID. */
export const LIVE_CHANNEL = 'pgwasm_live'
/** The statement trigger's name on each watched table. */
export const LIVE_TRIGGER = 'pgwasm_live_notify'
/**
 * The trigger function. In pg_temp so that nothing outlives the session:
 * when it ends, dropping the function cascades to every trigger using it (a
 * session that died leaves them until the next one's first temp object).
 */
export const LIVE_FUNCTION = 'pg_temp.pgwasm_live_notify()'

/** Told when a table it watches changed (after the commit). */
export interface TableWatcher {
  tableChanged(): void
}

/**
 * The watched tables of one database: a trigger per table while at least one
 * watcher needs it, and one LISTEN while any table is watched. Postgres
 * delivers the NOTIFY only on commit, drops it on rollback and sends one per
 * table per transaction however many statements wrote there: that is the
 * coalescing of a transaction's writes.
 */
export class TableWatch {
  readonly #db: PGlite
  readonly #watchers = new Map<number, Set<TableWatcher>>()
  /** Tables whose trigger exists (as of the last DDL that ran). */
  readonly #installed = new Set<number>()
  #unlisten: (() => Promise<void>) | undefined
  /** DDL runs one batch at a time, each bringing the database to the wanted set. */
  #sync: Promise<void> = Promise.resolve()

  constructor(db: PGlite) {
    this.#db = db
  }

  /** Tables with a trigger now; for tests and diagnostics. */
  get installedTables(): number[] {
    return [...this.#installed]
  }

  /** Adds `watcher` to `tables` and resolves once each has its trigger. */
  async watch(watcher: TableWatcher, tables: readonly number[]): Promise<void> {
    for (const oid of tables) {
      let set = this.#watchers.get(oid)
      if (!set) this.#watchers.set(oid, (set = new Set()))
      set.add(watcher)
    }
    try {
      await this.#reconcile()
    } catch (err) {
      this.#forget(watcher, tables)
      // Best effort: the failed batch may have been another watcher's to undo.
      await this.#reconcile().catch(() => {})
      throw err
    }
  }

  /** Removes `watcher`; tables nobody watches any more lose their trigger. */
  async unwatch(watcher: TableWatcher, tables: readonly number[]): Promise<void> {
    this.#forget(watcher, tables)
    await this.#reconcile()
  }

  #forget(watcher: TableWatcher, tables: readonly number[]): void {
    for (const oid of tables) {
      const set = this.#watchers.get(oid)
      if (!set) continue
      set.delete(watcher)
      if (set.size === 0) this.#watchers.delete(oid)
    }
  }

  readonly #onNotify = (payload: string): void => {
    const set = this.#watchers.get(Number(payload))
    if (set) for (const watcher of set) watcher.tableChanged()
  }

  #reconcile(): Promise<void> {
    const run = this.#sync.then(() => this.#apply())
    this.#sync = run.catch(() => {})
    return run
  }

  async #apply(): Promise<void> {
    const db = this.#db
    if (db.closed) return
    const add = [...this.#watchers.keys()].filter((oid) => !this.#installed.has(oid))
    const drop = [...this.#installed].filter((oid) => !this.#watchers.has(oid))
    const empty = this.#watchers.size === 0
    // LISTEN before any trigger exists, so no commit after it goes unseen.
    if (!empty && !this.#unlisten) this.#unlisten = await db.listen(LIVE_CHANNEL, this.#onNotify)
    if (add.length > 0 || drop.length > 0) {
      await db.exec(ddl(add, drop, empty))
      for (const oid of add) this.#installed.add(oid)
      for (const oid of drop) this.#installed.delete(oid)
    }
    if (empty && this.#unlisten) {
      const unlisten = this.#unlisten
      this.#unlisten = undefined
      await unlisten()
    }
  }
}

/** One implicit transaction: all of it applies or none. */
function ddl(add: readonly number[], drop: readonly number[], empty: boolean): string {
  const parts: string[] = []
  if (add.length > 0) {
    // Re-created on every addition: a DISCARD TEMP may have dropped it (and its triggers).
    parts.push(`CREATE OR REPLACE FUNCTION ${LIVE_FUNCTION} RETURNS trigger LANGUAGE plpgsql AS $pgwasm_live$
BEGIN
  PERFORM pg_catalog.pg_notify('${LIVE_CHANNEL}', TG_RELID::text);
  RETURN NULL;
END
$pgwasm_live$`)
    parts.push(
      forEachTable(
        add,
        `CREATE OR REPLACE TRIGGER ${LIVE_TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION ${LIVE_FUNCTION}`,
      ),
    )
  }
  if (empty) {
    // Takes every trigger with it, also of tables renamed or moved since.
    parts.push(`DROP FUNCTION IF EXISTS ${LIVE_FUNCTION} CASCADE`)
  } else if (drop.length > 0) {
    parts.push(forEachTable(drop, `DROP TRIGGER IF EXISTS ${LIVE_TRIGGER} ON %s`))
  }
  return parts.join(';\n')
}

/**
 * Runs `template` with `%s` as each table's current name (by OID, so renames
 * do not matter; a table dropped meanwhile is skipped).
 */
function forEachTable(oids: readonly number[], template: string): string {
  const list = oids.map((oid) => String(Math.trunc(oid))).join(',')
  return `DO $pgwasm_live$
DECLARE rel regclass;
BEGIN
  FOR rel IN SELECT oid::regclass FROM pg_catalog.pg_class WHERE oid = ANY ('{${list}}'::oid[]) LOOP
    EXECUTE pg_catalog.format('${template}', rel);
  END LOOP;
END
$pgwasm_live$`
}

const watches = new WeakMap<PGlite, TableWatch>()

/** The one {@link TableWatch} of `db`, shared by every live namespace on it (the trigger names are per table). */
export function tableWatchOf(db: PGlite): TableWatch {
  let watch = watches.get(db)
  if (!watch) watches.set(db, (watch = new TableWatch(db)))
  return watch
}
