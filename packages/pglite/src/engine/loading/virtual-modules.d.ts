// Modules the browser build generates (scripts/build-browser.mjs); Node never imports them.
declare module 'pgwasm:engine-manifest' {
  export const engineVersion: string
  /** Byte size of each first-visit asset as served. */
  export const assetSizes: Record<'pglite.wasm' | 'pglite.data' | 'template.pgwt.lzma' | 'initdb.wasm', number>
  /** The engine's data segments as one span of memory: where it starts, how long it is (memory-image.ts). */
  export const memoryImage: { readonly base: number; readonly bytes: number }
  /** The template image's size once decoded. */
  export const templateBytes: number
  /**
   * pglite.data's files in the glue's order: each one's size and the index
   * of its pack; each pack's name, decoded size and served size (pack 0
   * travels in the first-visit pglite.data, after the memory image).
   */
  export const dataFiles: {
    readonly size: number
    readonly sizes: readonly number[]
    readonly packs: readonly number[]
    readonly packSizes: readonly (readonly [string, number, number])[]
  }
  /** The template catalog's array types: element OID, array OID, delimiter. */
  export const arrayTypes: readonly (readonly [number, number, string])[]
  /** Where the guarded settings' records are in the engine (session-guards.ts). */
  export const guardRecords: Readonly<Record<string, number>>
  /** The function-table slot of the interrupt poll in the shipped, rewritten pglite.wasm (interrupt-polls.ts). */
  export const interruptPollSlot: number
}
// The single-file build's copies: each asset gzipped, base64 (the template's gzip is the asset itself, base64 only).
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
