// The contrib module type alone, so that the option types and the bundle readers need not import the installer.
/**
 * A contrib module to install into the instance, for the `extensions` option
 * (see `@pgwasm/pglite/contrib` for one per bundle the engine ships). It adds
 * no `db[key]` namespace; its SQL objects appear with `CREATE EXTENSION`.
 */
export interface ContribExtension {
  /** The extension's name, as `CREATE EXTENSION` spells it. */
  readonly name: string
  /** The engine bundle holding it: `<bundle>.tar.gz` in `@electric-sql/pglite`'s dist. */
  readonly bundle: string
  /**
   * A bundle file elsewhere, for a bundle built for the same engine outside
   * its package: in Node a path or `file:` URL, in the browser a URL to
   * fetch. `bundle` then only names it.
   */
  readonly bundlePath?: string | URL
  /** Libraries Postgres must load at start (`shared_preload_libraries`), e.g. pg_stat_statements. */
  readonly sharedPreloadLibraries?: readonly string[]
  /**
   * Compile its side modules when Postgres first loads them (`CREATE
   * EXTENSION`, `LOAD`) instead of before the engine starts: a module never
   * used costs nothing but its files, one that is used pays its compile
   * then. See {@link onUse}.
   */
  readonly loadOnUse?: boolean
}
