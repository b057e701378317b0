import type { EngineFiles, EngineSource } from './engine-files.js'

/**
 * Where the browser build's engine comes from: the assets beside the
 * script (or at `assetBaseUrl`), or the copies inside the bundle when the
 * page imported `@pgwasm/pglite/embedded` (embedded-engine.browser.ts),
 * which registers them here.
 */
export interface EmbeddedEngine {
  readEngineFiles(): Promise<EngineFiles>
  /** A contrib bundle's gzipped tarball, or undefined when the engine has no bundle of that name. */
  contribBundle(name: string): Promise<Uint8Array> | undefined
}

let embedded: EmbeddedEngine | undefined
let lastBase: string | undefined

export function useEmbeddedEngine(engine: EmbeddedEngine): void {
  embedded = engine
}

/** The embedded engine, when the caller named no asset URL and the page imported one. */
export function embeddedEngine(source: EngineSource = {}): EmbeddedEngine | undefined {
  return source.assetBaseUrl === undefined ? embedded : undefined
}

/**
 * The folder URL (ending in `/`) the assets are fetched from: the
 * option, else `assets/` beside this script, where a bundler leaves the
 * app's script (its `import.meta.url`), or beside the page when the
 * bundle has no `import.meta` (an IIFE).
 */
export function assetBase(source: EngineSource = {}): string {
  const here = (import.meta as { url?: string }).url ?? globalThis.location?.href
  const base = source.assetBaseUrl === undefined ? new URL('./assets/', here).href : new URL(source.assetBaseUrl.endsWith('/') ? source.assetBaseUrl : `${source.assetBaseUrl}/`, globalThis.location?.href).href
  lastBase = base
  return base
}

/**
 * The folder the last engine load used: contrib bundles come from its
 * `contrib/`. Bundles are kept per page by name (extensions/contrib.ts),
 * so one page has one source for them, as it has one for the engine.
 */
export function lastAssetBase(): string {
  return lastBase ?? assetBase()
}
