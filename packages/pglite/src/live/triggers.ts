import type { LiveDb } from './types.js'

/** The NOTIFY channel of every watched table; the payload is the table's OID. */
export const LIVE_CHANNEL = 'pgwasm_live'
/** The statement trigger's name on each watched table (a `PGliteWorker`'s adds a tag per page: `pgwasm_live_notify_<hex>`). */
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
  readonly #db: LiveDb
  /** This watch's trigger and function names: {@link LIVE_TRIGGER} and {@link LIVE_FUNCTION}, tagged on a shared session. */
  readonly #names: WatchNames
  readonly #watchers = new Map<number, Set<TableWatcher>>()
  /** Tables whose trigger exists (as of the last DDL that ran). */
  readonly #installed = new Set<number>()
  #unlisten: (() => Promise<void>) | undefined
  /** DDL runs one batch at a time, each bringing the database to the wanted set. */
  #sync: Promise<void> = Promise.resolve()

  constructor(db: LiveDb) {
    this.#db = db
    // A worker's session may be shared with other tabs, each with a watch of
    // its own: names of their own keep one tab's DROP from taking another's
    // triggers. A new leader is a new session: install everything again.
    if (db.onLeaderChange) {
      this.#names = watchNames(`_${randomTag()}`)
      db.onLeaderChange(this.#sessionReplaced)
    } else {
      this.#names = watchNames('')
    }
  }

  readonly #sessionReplaced = (): void => {
    this.#installed.clear()
    // The page re-LISTENs its channels on the new leader by itself; the
    // writes made while no trigger existed are caught by refreshing everyone.
    void this.#reconcile()
      .catch(() => {})
      .then(() => {
        for (const set of [...this.#watchers.values()]) for (const watcher of set) watcher.tableChanged()
      })
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
      await db.exec(ddl(this.#names, add, drop, empty))
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

interface WatchNames {
  readonly trigger: string
  /** Qualified and called: `pg_temp.name()`. */
  readonly fn: string
}

function watchNames(tag: string): WatchNames {
  return { trigger: `${LIVE_TRIGGER}${tag}`, fn: `pg_temp.${LIVE_TRIGGER}${tag}()` }
}

/** 12 hex digits: safe in an identifier, and unlikely to meet another tab's. */
function randomTag(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(6))
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
}

const TAGGED_INSTALL = new RegExp(`^CREATE OR REPLACE FUNCTION pg_temp\\.(${LIVE_TRIGGER}_[0-9a-f]{12})\\(\\)`)

/**
 * The trigger function a tagged watch's DDL installs, when `sql` is such
 * DDL: a worker serving other tabs records it, to drop it (and its
 * triggers) when the tab that sent it goes without closing.
 */
export function taggedWatchIn(sql: string): string | undefined {
  return TAGGED_INSTALL.exec(sql)?.[1]
}

/** Drops a tagged watch's function and, with it, every trigger of it. `name` comes from {@link taggedWatchIn}. */
export function dropTaggedWatch(name: string): string {
  return `DROP FUNCTION IF EXISTS pg_temp.${name}() CASCADE`
}

/** One implicit transaction: all of it applies or none. */
function ddl(names: WatchNames, add: readonly number[], drop: readonly number[], empty: boolean): string {
  const parts: string[] = []
  if (add.length > 0) {
    // Re-created on every addition: a DISCARD TEMP may have dropped it (and its triggers).
    parts.push(`CREATE OR REPLACE FUNCTION ${names.fn} RETURNS trigger LANGUAGE plpgsql AS $pgwasm_live$
BEGIN
  PERFORM pg_catalog.pg_notify('${LIVE_CHANNEL}', TG_RELID::text);
  RETURN NULL;
END
$pgwasm_live$`)
    parts.push(
      forEachTable(
        add,
        `CREATE OR REPLACE TRIGGER ${names.trigger} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION ${names.fn}`,
      ),
    )
  }
  if (empty) {
    // Takes every trigger with it, also of tables renamed or moved since.
    parts.push(`DROP FUNCTION IF EXISTS ${names.fn} CASCADE`)
  } else if (drop.length > 0) {
    parts.push(forEachTable(drop, `DROP TRIGGER IF EXISTS ${names.trigger} ON %s`))
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

const watches = new WeakMap<LiveDb, TableWatch>()

/** The one {@link TableWatch} of `db`, shared by every live namespace on it (the trigger names are per table). */
export function tableWatchOf(db: LiveDb): TableWatch {
  let watch = watches.get(db)
  if (!watch) watches.set(db, (watch = new TableWatch(db)))
  return watch
}
