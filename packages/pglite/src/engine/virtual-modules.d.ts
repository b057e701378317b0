// Modules the browser build generates (scripts/build-browser.mjs); Node never imports them.
declare module 'pgwasm:engine-manifest' {
  export const engineVersion: string
  /** Byte size of each asset as served (template gzipped, the others raw). */
  export const sizes: Record<'pglite.wasm' | 'pglite.data' | 'initdb.wasm' | 'template.pgwt.gz', number>
  /** The template catalog's array types: element OID, array OID, delimiter. */
  export const arrayTypes: readonly (readonly [number, number, string])[]
  /** Where the guarded settings' records are in the engine (session-guards.ts). */
  export const guardRecords: Readonly<Record<string, number>>
  /** The function-table slot of the interrupt poll in the shipped, rewritten pglite.wasm (interrupt-polls.ts). */
  export const interruptPollSlot: number
}
// Each asset gzipped, base64 (the template's gzip is the asset itself, base64 only).
declare module 'pgwasm:engine-core' {
  export const gzipped: Record<'pglite.wasm' | 'pglite.data', string>
}
declare module 'pgwasm:engine-initdb' {
  export const gzipped: Record<'initdb.wasm', string>
}
declare module 'pgwasm:engine-template' {
  export const gzipped: Record<'template.pgwt.gz', string>
}
// The engine's contrib bundles, each gzipped, base64, in a chunk of its own loaded on use.
declare module 'pgwasm:contrib-bundles' {
  export const loaders: Readonly<Record<string, () => Promise<{ gzipped: string }>>>
}
declare module 'pgwasm:postgres-glue' {
  const factory: unknown
  export default factory
}
declare module 'pgwasm:initdb-glue' {
  const factory: unknown
  export default factory
}
