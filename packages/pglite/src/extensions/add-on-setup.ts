// Apart from the option types, which name the PGlite class: the add-on wiring reads it without them.

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
