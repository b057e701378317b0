import { inNode } from './engine/node-builtin.js'
import type { DataTree } from './engine/files/pgdata-tree.js'
import type { ContribExtension } from './extensions/contrib-types.js'
import type { DataDirArchive } from './fs/dump.js'
import type { Filesystem } from './fs-compat/filesystem.js'
import type { PGliteInterface } from './interface.js'
import type { Parser, Serializer } from './types/index.js'

/** What an add-on's `setup` returns (every part optional). */
export interface PGliteExtensionSetup {
  namespaceObj?: unknown
  close?: () => Promise<void>
  init?: () => Promise<void>
  /** A bundle (`.tar.gz`) to install before Postgres starts: a path or `file:` URL in Node, a URL in the browser. */
  bundlePath?: string | URL
  /** Accepted for PGlite's add-ons and not used: the engine's module options are pgwasm's own. */
  emscriptenOpts?: unknown
}

/**
 * An add-on, as PGlite's `extensions` (e.g. `live` from
 * `@pgwasm/pglite/live`, or `vector` from `@electric-sql/pglite-pgvector`).
 */
export interface PGliteExtension {
  name: string
  /**
   * Called before the engine starts, as PGlite calls it: the instance is
   * not ready yet, so it must not query here. A `bundlePath` it returns (a
   * bundle built for this engine, as pgvector's package returns) is installed
   * like a contrib module; `namespaceObj` becomes `db[key]` and `init` runs
   * once the database is ready; `close` runs first thing in `db.close()`,
   * while queries still work.
   */
  setup(db: PGliteInterface, emscriptenOpts?: Record<string, unknown>, clientOnly?: boolean): Promise<PGliteExtensionSetup>
  /** Compile its bundle's side modules at first use rather than before the engine starts (see `onUse`). */
  readonly loadOnUse?: boolean
}

/** What `PGlite.create({ extensions })` adds to the instance: `db[key]` per extension. */
export type ExtensionNamespaces<E> =
  E extends Record<string, PGliteExtension | ContribExtension>
    ? // The bare option type (no literal keys) adds nothing.
      string extends keyof E
      ? unknown
      : {
          // Contrib bundles add no namespace: their keys are left out.
          readonly [K in keyof E as E[K] extends PGliteExtension ? K : never]: E[K] extends {
            setup(db: PGliteInterface): Promise<{ namespaceObj?: infer N }>
          }
            ? N
            : never
        }
    : unknown

/** Options of `new PGlite(dataDir, options)`, compatible with `@electric-sql/pglite`. */
export interface PGliteOptions {
  /**
   * `memory://` or nothing: in memory; a path or `file://` path: a directory
   * (Node; missing parent folders are created); `idb://<name>`: IndexedDB
   * (browser). Other schemes are refused (EngineError `BAD_DATA_DIR`).
   */
  dataDir?: string
  /** Role to `SET ROLE` to after start. @default 'postgres' */
  username?: string
  /**
   * A file system object as PGlite's `fs` option takes it: `MemoryFS`,
   * `NodeFS` or `IdbFs` (from `@pgwasm/pglite` and its subpaths) stand for
   * the matching `dataDir`; other classes are refused (EngineError
   * `BAD_DATA_DIR`). Its `init` runs before the engine starts, `closeFs`
   * after it stops.
   */
  fs?: Filesystem
  /** @default 'postgres' */
  database?: string
  /** Postgres debug level 0-5; above 0 the server log goes to `console.debug`. @default 0 */
  debug?: 0 | 1 | 2 | 3 | 4 | 5
  /** Initial WASM memory in bytes. @default 128 MiB */
  initialMemory?: number
  /**
   * The most bytes the engine may hold in memory: its heap (the WASM
   * memory: sorts, hashes, arrays, results being built) and its in-memory
   * files together (an in-memory database's tables and indexes, temporary
   * files, `/tmp`; not WAL, which checkpoints bound). A statement that
   * needs more fails as on a server that ran out of memory or disk
   * (`53200 out of memory`, or `53100` for a file), its transaction rolls
   * back, and the instance goes on. Each growth is checked against the
   * limit; what it then allocates may exceed the request (the heap by up
   * to 20%, at most 96 MiB; a file by up to 32 MiB): that is the margin.
   * A heap that already is larger is not shrunk.
   * @default no limit (the build's heap stops at 2 GiB)
   */
  maxMemory?: number
  /** Replaces the default Postgres command-line arguments (after `--single`). */
  startParams?: string[]
  /** Server settings, as `postgresql.conf` lines or a name/value map; passed as `-c` options. */
  postgresqlConf?: string | string[] | Record<string, string | number | boolean>
  /** PGlite's spelling of {@link postgresqlConf}. */
  postgresqlconf?: string | string[]
  /** Parsers by type OID, over the defaults. */
  parsers?: Record<number, Parser>
  /** Serializers by parameter type OID, over the defaults. */
  serializers?: Record<number, Serializer>
  /**
   * How many prepared statements `query()` keeps (LRU, per SQL text);
   * `false` prepares every call anew. @default 100
   */
  statementCache?: number | false
  /** Extra initdb arguments (a separate template is made per set). */
  initdbArgs?: string[]
  /** Where initdb templates are cached on disk; `false` for memory only. */
  templateCacheDir?: string | false
  /**
   * For a directory database: commits return before their WAL is flushed
   * (`synchronous_commit=off`), so a crash can lose the last few commits
   * (never corrupt the database). Off by default: a commit that returned is
   * on disk. No effect in memory, where nothing outlives the process anyway.
   * @default false
   */
  relaxedDurability?: boolean
  /**
   * Browser build only: the URL of the folder holding the engine files (a
   * copy of the package's `dist/browser/assets/`). By default they are
   * fetched from `assets/` beside the script that imports the package (the
   * app's bundle); with `@pgwasm/pglite/embedded`, only when given. A
   * missing, truncated or mis-served file rejects `create()` with an
   * EngineError naming the URL.
   */
  assetBaseUrl?: string
  /**
   * Extensions by key: add-ons set up when the database is ready (each
   * `namespaceObj` becomes `db[key]`), and contrib modules from
   * `@pgwasm/pglite/contrib`, installed before Postgres starts so that
   * `CREATE EXTENSION` works. An instance with contrib modules always boots
   * Postgres (no start-up snapshot).
   */
  extensions?: Record<string, PGliteExtension | ContribExtension>
  /**
   * Opens the database from a data-directory tarball made by `dumpDataDir()`
   * (ours or `@electric-sql/pglite`'s; gzip or plain tar). In memory it is
   * the new database; with a directory `dataDir`, its files are written there
   * first, and a directory that already holds a database is refused.
   */
  loadDataDir?: DataDirArchive
  /** @internal Start an in-memory database from this data tree (used by `clone()`). */
  loadDataTree?: DataTree
  /** @internal Start as a memory copy of this backend (used by `clone()`). */
  cloneOf?: import('./engine/backend/backend.js').Backend
  /** @internal Start from the state saved under this key, when there is one (used by `createCached()`). */
  savedState?: string
}

/** The arguments PGlite 0.5 starts Postgres with (docs/engine.md), without `--single`. */
export const BASE_ARGS: readonly string[] = [
  '-O',
  '-j',
  '-c', 'search_path=public',
  '-c', 'exit_on_error=false',
  '-c', 'log_checkpoints=false',
  '-c', 'max_worker_processes=0',
  '-c', 'max_parallel_workers=0',
  '-c', 'max_parallel_workers_per_gather=0',
  '-c', 'io_method=sync',
  '-c', 'max_parallel_maintenance_workers=0',
]

/**
 * An `idb://` database runs on an in-memory file system whose writes are
 * journaled to IndexedDB after each commit: fsync is moot there, but a commit
 * record must be written before the query returns (no synchronous_commit=off).
 * Its WAL is in memory, bounded as an in-memory database's is (below).
 */
export const IDB_ARGS: readonly string[] = ['-F', '-c', 'full_page_writes=off', '-c', 'max_wal_size=64MB', '-c', 'min_wal_size=32MB']

/**
 * Nothing of an in-memory database outlives the process: durability work is
 * waste. Commits still flush their WAL (to memory, without fsync): with
 * `synchronous_commit=off` and no WAL writer process to flush it later,
 * scans could not set hint bits on rows of unflushed commits and looked
 * their transactions up again on every read (a scan-heavy workload ran
 * ~15% slower).
 *
 * A 32 MB buffer pool instead of initdb's 128 MB: a miss in front of the
 * in-memory file system is a memcpy (the speedtest ran no slower with 16 or
 * 32 MB), while every clone and snapshot scans the memory below the program
 * break: ~170 MB with a 128 MB pool, ~75 MB with 32 MB.
 *
 * WAL lives in memory here too: after a checkpoint (engine/backend/wal-checkpoints.ts)
 * Postgres keeps as many recycled segments as `max_wal_size` allows, which
 * at initdb's 1 GB held up to 1 GB after one bulk load; 64 MB keeps four.
 *
 * `wal_level=minimal`: WAL here serves no standby and no crash recovery, so
 * a table created or truncated in the same transaction is loaded without
 * WAL and written out at commit, as Postgres does at that level (CREATE
 * TABLE AS of 300k rows of 1 kB: 754 -> 428 ms). Streaming replication is
 * off at that level (`max_wal_senders=0`), which nothing in one process uses.
 */
const MEMORY_ARGS: readonly string[] = [
  '-F',
  '-c', 'full_page_writes=off',
  '-c', 'shared_buffers=32MB',
  '-c', 'max_wal_size=64MB',
  '-c', 'min_wal_size=32MB',
  '-c', 'wal_level=minimal',
  '-c', 'max_wal_senders=0',
]

const RELAXED_DISK_ARGS: readonly string[] = ['-c', 'synchronous_commit=off']

/**
 * In a browser, a smaller buffer pool than initdb's 128 MB: Postgres zeroes
 * its whole shared memory at start (a plain memset in the engine, ~100 ms of
 * a ~200 ms start in Chromium, and as much resident memory per database),
 * while a miss in front of the in-memory file system costs a memcpy.
 * `postgresqlConf: { shared_buffers }` overrides it.
 */
const BROWSER_ARGS: readonly string[] = ['-c', 'shared_buffers=16MB']

/** The smallest and largest buffer pool a directory database starts with (the largest is initdb's). */
const DIRECTORY_POOL_MB = { min: 32, max: 128 }

/**
 * A directory database's buffer pool, from the size of its relation files at
 * open: the smallest power of two from 32 to 128 MB that holds them with a
 * quarter to spare. Postgres zeroes the whole pool as it starts (as much
 * resident memory, and ~45 ms of a ~260 ms reopen for 128 MB), while a pool
 * larger than the data is never filled; a miss reads the OS page cache.
 */
export function directoryPoolMB(relationBytes: number): number {
  let mb = DIRECTORY_POOL_MB.min
  while (mb < DIRECTORY_POOL_MB.max && mb * 1024 * 1024 < relationBytes * 1.25) mb *= 2
  return mb
}

/**
 * @param relationBytes For a directory database in Node, the size of its
 *   relation files, which sizes the buffer pool ({@link directoryPoolMB});
 *   `postgresqlConf: { shared_buffers }` still wins.
 */
export function startArgsFor(options: PGliteOptions, inMemory: boolean, relationBytes?: number): string[] {
  const pool = !inMemory && relationBytes !== undefined && inNode ? ['-c', `shared_buffers=${directoryPoolMB(relationBytes)}MB`] : []
  const args = options.startParams
    ? options.startParams.filter((a) => a !== '--single')
    : [...BASE_ARGS, ...(inMemory ? MEMORY_ARGS : options.relaxedDurability ? RELAXED_DISK_ARGS : []), ...(inNode ? pool : BROWSER_ARGS)]
  // ALTER SYSTEM writes settings the next start reads: one statement could
  // leave a database that no longer opens (shared_buffers = '100GB'). Settings
  // come through the options instead; an explicit one below still wins.
  args.unshift('-c', 'allow_alter_system=off')
  // `-O` (PGlite's arguments) lets SQL change the system catalogs' definitions:
  // `TRUNCATE pg_database` would leave a directory that no longer opens. As on a
  // server, a superuser may still SET it for a session.
  args.push('-c', 'allow_system_table_mods=off')
  if (options.debug) args.push('-d', String(options.debug))
  for (const [name, value] of confEntries(options.postgresqlConf ?? options.postgresqlconf)) args.push('-c', `${name}=${value}`)
  return args
}

function confEntries(conf: PGliteOptions['postgresqlConf']): [string, string][] {
  if (!conf) return []
  if (typeof conf === 'object' && !Array.isArray(conf)) return Object.entries(conf).map(([k, v]) => [k, String(v)])
  const lines = (Array.isArray(conf) ? conf : conf.split('\n')).map((l) => l.replace(/#.*$/, '').trim()).filter(Boolean)
  return lines.map((line) => {
    const eq = line.indexOf('=')
    if (eq < 0) throw new TypeError(`\`postgresqlConf\` line \`${line}\` is not \`name = value\``)
    let value = line.slice(eq + 1).trim()
    if (value.startsWith("'") && value.endsWith("'")) value = value.slice(1, -1).replace(/''/g, "'")
    return [line.slice(0, eq).trim(), value]
  })
}

/** {@link startArgsFor} by where the database is stored: in memory, in a directory (sized by its relation files) or in IndexedDB. */
export function startArgsForStorage(options: PGliteOptions, storage: 'memory' | 'directory' | 'journaled', relationBytes?: number): string[] {
  if (storage === 'journaled' && !options.startParams) return [...startArgsFor(options, false), ...IDB_ARGS]
  return startArgsFor(options, storage !== 'directory', relationBytes)
}
