/**
 * The contrib modules shipped with the engine, one per export, for the
 * `extensions` option:
 *
 * ```ts
 * import { PGlite } from '@pgwasm/pglite'
 * import { pgcrypto, hstore } from '@pgwasm/pglite/contrib'
 *
 * const db = await PGlite.create({ extensions: { pgcrypto, hstore } })
 * await db.exec('create extension pgcrypto')
 * ```
 *
 * Names follow `@electric-sql/pglite/contrib/*`; `uuid-ossp` is `uuid_ossp`.
 * @packageDocumentation
 */
import type { ContribExtension } from './extensions/contrib.js'

export type { ContribExtension } from './extensions/contrib.js'

function contrib(name: string, bundle: string, sharedPreloadLibraries?: readonly string[]): ContribExtension {
  return Object.freeze(sharedPreloadLibraries ? { name, bundle, sharedPreloadLibraries: Object.freeze([...sharedPreloadLibraries]) } : { name, bundle })
}

/** Verifies B-tree and heap integrity (`bt_index_check`, `verify_heapam`). */
export const amcheck: ContribExtension = contrib('amcheck', 'amcheck')

/** Logs plans of slow statements; a library: `LOAD 'auto_explain'`. */
export const auto_explain: ContribExtension = contrib('auto_explain', 'auto_explain')

/** Bloom-filter index access method (`USING bloom`). */
export const bloom: ContribExtension = contrib('bloom', 'bloom')

/** GIN operator classes for scalar types. */
export const btree_gin: ContribExtension = contrib('btree_gin', 'btree_gin')

/** GiST operator classes for scalar types (exclusion constraints on `=`). */
export const btree_gist: ContribExtension = contrib('btree_gist', 'btree_gist')

/** Case-insensitive text type. */
export const citext: ContribExtension = contrib('citext', 'citext')

/** Multi-dimensional cubes. */
export const cube: ContribExtension = contrib('cube', 'cube')

/** Text-search dictionary for integers. */
export const dict_int: ContribExtension = contrib('dict_int', 'dict_int')

/** Text-search synonym dictionary. */
export const dict_xsyn: ContribExtension = contrib('dict_xsyn', 'dict_xsyn')

/** Great-circle distances; needs `cube` (`CREATE EXTENSION earthdistance CASCADE`). */
export const earthdistance: ContribExtension = contrib('earthdistance', 'earthdistance')

/** Foreign tables over files in the engine's file system. */
export const file_fdw: ContribExtension = contrib('file_fdw', 'file_fdw')

/** `levenshtein`, `soundex`, `metaphone`, `dmetaphone`. */
export const fuzzystrmatch: ContribExtension = contrib('fuzzystrmatch', 'fuzzystrmatch')

/** Key/value pairs in one value. */
export const hstore: ContribExtension = contrib('hstore', 'hstore')

/** Operators and indexes for `int[]`. */
export const intarray: ContribExtension = contrib('intarray', 'intarray')

/** ISBN, ISMN, ISSN, EAN13 and UPC types. */
export const isn: ContribExtension = contrib('isn', 'isn')

/** Large-object maintenance (`lo` type, `lo_manage` trigger). */
export const lo: ContribExtension = contrib('lo', 'lo')

/** Hierarchical labels (`a.b.c`) and their operators. */
export const ltree: ContribExtension = contrib('ltree', 'ltree')

/** Low-level page contents. */
export const pageinspect: ContribExtension = contrib('pageinspect', 'pageinspect')

/** Rejects weak passwords; a library: `LOAD 'passwordcheck'`. */
export const passwordcheck: ContribExtension = contrib('passwordcheck', 'passwordcheck')

/** The shared buffer cache as a view. */
export const pg_buffercache: ContribExtension = contrib('pg_buffercache', 'pg_buffercache')

/** The free space map. */
export const pg_freespacemap: ContribExtension = contrib('pg_freespacemap', 'pg_freespacemap')

/** Logical decoding snapshot files. */
export const pg_logicalinspect: ContribExtension = contrib('pg_logicalinspect', 'pg_logicalinspect')

/** `EXPLAIN (DEBUG)` and `(RANGE_TABLE)`; a library: `LOAD 'pg_overexplain'`. */
export const pg_overexplain: ContribExtension = contrib('pg_overexplain', 'pg_overexplain')

/** Statement statistics; loaded at start (`shared_preload_libraries`). */
export const pg_stat_statements: ContribExtension = contrib('pg_stat_statements', 'pg_stat_statements', ['pg_stat_statements'])

/** Repairs damaged tuples. */
export const pg_surgery: ContribExtension = contrib('pg_surgery', 'pg_surgery')

/** Trigram similarity (`similarity`, `%`) and indexes. */
export const pg_trgm: ContribExtension = contrib('pg_trgm', 'pg_trgm')

/** The visibility map. */
export const pg_visibility: ContribExtension = contrib('pg_visibility', 'pg_visibility')

/** WAL records. */
export const pg_walinspect: ContribExtension = contrib('pg_walinspect', 'pg_walinspect')

/** Hashes, HMAC, password hashing and encryption. */
export const pgcrypto: ContribExtension = contrib('pgcrypto', 'pgcrypto')

/** Line segments and floating-point intervals. */
export const seg: ContribExtension = contrib('seg', 'seg')

/** The SPI examples bundle; also `autoinc`, `insert_username`, `moddatetime`, `refint`. */
export const spi: ContribExtension = contrib('spi', 'spi')

/** Trigger filling a column from a sequence (in the `spi` bundle). */
export const autoinc: ContribExtension = contrib('autoinc', 'spi')

/** Trigger recording the current user (in the `spi` bundle). */
export const insert_username: ContribExtension = contrib('insert_username', 'spi')

/** Trigger keeping a modification timestamp (in the `spi` bundle). */
export const moddatetime: ContribExtension = contrib('moddatetime', 'spi')

/** Referential-integrity triggers (in the `spi` bundle). */
export const refint: ContribExtension = contrib('refint', 'spi')

/** `crosstab`, `normal_rand`, `connectby`. */
export const tablefunc: ContribExtension = contrib('tablefunc', 'tablefunc')

/** Trigger that notifies listeners of changes. */
export const tcn: ContribExtension = contrib('tcn', 'tcn')

/** `TABLESAMPLE SYSTEM_ROWS(n)`. */
export const tsm_system_rows: ContribExtension = contrib('tsm_system_rows', 'tsm_system_rows')

/** `TABLESAMPLE SYSTEM_TIME(ms)`. */
export const tsm_system_time: ContribExtension = contrib('tsm_system_time', 'tsm_system_time')

/** Text-search dictionary removing accents (`unaccent('Hôtel')`). */
export const unaccent: ContribExtension = contrib('unaccent', 'unaccent')

/** `uuid_generate_v1`…`v5` (`CREATE EXTENSION "uuid-ossp"`). */
export const uuid_ossp: ContribExtension = contrib('uuid-ossp', 'uuid-ossp')
