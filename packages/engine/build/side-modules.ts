// The side modules the build makes besides the backend: each is a .so the
// backend loads with dlopen when SQL first needs it, and each one's imports
// join the in-process engine's export list (side-module-imports.ts).

/** PostgreSQL's own modules outside contrib. */
export const CORE_MODULE_DIRS = [
  // initdb installs PL/pgSQL and the snowball dictionaries.
  'src/pl/plpgsql',
  'src/backend/snowball',
  // Conversions between the server's encoding and a client's (convert_to, client_encoding).
  'src/backend/utils/mb/conversion_procs',
  // Logical replication's output plugin.
  'src/backend/replication/pgoutput',
]

/** contrib modules built and installed (extensions, and plain modules such as auto_explain). */
export const CONTRIB_MODULES = [
  'amcheck',
  'auth_delay',
  'auto_explain',
  'basic_archive',
  'bloom',
  'btree_gin',
  'btree_gist',
  'citext',
  'cube',
  'dict_int',
  'dict_xsyn',
  'earthdistance',
  'file_fdw',
  'fuzzystrmatch',
  'hstore',
  'intagg',
  'intarray',
  'isn',
  'lo',
  'ltree',
  'pageinspect',
  'passwordcheck',
  'pg_buffercache',
  'pg_freespacemap',
  'pg_logicalinspect',
  'pg_overexplain',
  'pg_prewarm',
  'pg_stat_statements',
  'pg_surgery',
  'pg_trgm',
  'pg_visibility',
  'pg_walinspect',
  'pgrowlocks',
  'pgstattuple',
  'seg',
  'spi',
  'tablefunc',
  'tcn',
  'test_decoding',
  'tsm_system_rows',
  'tsm_system_time',
  'unaccent',
]

/** contrib modules left out, and why (README.md lists them too). */
export const CONTRIB_LEFT_OUT: Record<string, string> = {
  pgcrypto: 'needs OpenSSL, not built to wasm here yet',
  sslinfo: 'needs OpenSSL',
  'uuid-ossp': 'needs a UUID library',
  xml2: 'needs libxml2',
  dblink: 'links libpq, which is not a side module here',
  postgres_fdw: 'links libpq, which is not a side module here',
  sepgsql: 'needs SELinux',
  basebackup_to_shell: 'runs shell commands',
  oid2name: 'a client program',
  vacuumlo: 'a client program',
}

/**
 * The contrib modules of a source tree that the lists above do not name:
 * a new PostgreSQL version's module is built or left out on purpose, not
 * by omission. Perl and Python transforms are left out as a family.
 */
export function unaccountedContrib(sourceModules: readonly string[]): string[] {
  return sourceModules.filter(
    (name) => !CONTRIB_MODULES.includes(name) && !(name in CONTRIB_LEFT_OUT) && !/_pl(perl|python)u?$/.test(name),
  )
}
