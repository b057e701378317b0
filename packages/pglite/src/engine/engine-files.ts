import type { InitdbModule, ModuleFactory, PostgresModule } from './emscripten.js'
import { EngineError } from '../errors.js'
import type { DataTree } from './pgdata-tree.js'

/**
 * The engine files as this platform reads them. This is the Node source
 * (files of the pinned `@electric-sql/pglite` in node_modules); the browser
 * build swaps in `engine-files.browser.ts`, which carries them in the bundle.
 */
export interface EngineFiles {
  readonly pgliteWasm: WebAssembly.Module
  readonly pgliteData: ArrayBuffer
  readonly postgresFactory: ModuleFactory<PostgresModule>
  readonly engineVersion: string
  initdb(): Promise<{ module: WebAssembly.Module; factory: ModuleFactory<InitdbModule> }>
  /** A ready initdb result for the default initdb options, where the platform ships one. */
  bundledTemplate?(): Promise<DataTree>
  /** The array types (elem, arr, delim) of that template's catalog. */
  readonly bundledArrayTypes?: readonly (readonly [number, number, string])[]
}

/**
 * Starts unpacking the shipped template early, so it overlaps with compiling
 * the engine. Node ships none (its template comes from the disk cache).
 */
export function prefetchBundledTemplate(_source: EngineSource): void {}

/** Where the engine files come from, when the caller chose (browser only). */
export interface EngineSource {
  /** Base URL the browser build loads `pglite.wasm`, `pglite.data`... from instead of its embedded copies. */
  readonly assetBaseUrl?: string
}

let located: Promise<{ dist: string; engineVersion: string }> | undefined

/** Where the engine files are and which build they are; cheap, so callers can key caches before compiling. */
export function locateEngine(): Promise<{ dist: string; engineVersion: string }> {
  located ??= (async () => {
    const [{ createRequire }, { readFile }, { dirname, join }] = await Promise.all([
      import('node:module'),
      import('node:fs/promises'),
      import('node:path'),
    ])
    const require = createRequire(import.meta.url)
    try {
      // The package's export map lists the wasm files but not the glue, so
      // locate dist/ through an exported asset (wasm-abi.md §2.1).
      const dist = dirname(require.resolve('@electric-sql/pglite/pglite.wasm'))
      const pkg = JSON.parse(await readFile(join(dist, '..', 'package.json'), 'utf8')) as { version: string }
      return { dist, engineVersion: `pglite-${pkg.version}` }
    } catch (cause) {
      throw new EngineError('cannot find the engine package `@electric-sql/pglite`', { code: 'ASSET_MISSING', cause })
    }
  })()
  located.catch(() => {
    located = undefined
  })
  return located
}

export async function readEngineFiles(source: EngineSource): Promise<EngineFiles> {
  if (source.assetBaseUrl !== undefined) {
    throw new EngineError('`assetBaseUrl` is for the browser build; in Node the engine is read from node_modules', {
      code: 'ASSET_MISSING',
    })
  }
  const [{ readFile }, { join }, { pathToFileURL }] = await Promise.all([
    import('node:fs/promises'),
    import('node:path'),
    import('node:url'),
  ])
  const { dist, engineVersion } = await locateEngine()
  const read = async (name: string): Promise<Uint8Array> => {
    try {
      return await readFile(join(dist, name))
    } catch (cause) {
      throw new EngineError(`cannot read engine asset ${join(dist, name)}`, { code: 'ASSET_MISSING', cause })
    }
  }
  const [pgliteWasm, data, glue] = await Promise.all([
    read('pglite.wasm'),
    read('pglite.data'),
    import(pathToFileURL(join(dist, 'pglite.js')).href) as Promise<{ default: ModuleFactory<PostgresModule> }>,
  ])
  const initdb = async (): ReturnType<EngineFiles['initdb']> => {
    const [wasm, initdbGlue] = await Promise.all([
      read('initdb.wasm'),
      import(pathToFileURL(join(dist, 'initdb.js')).href) as Promise<{ default: ModuleFactory<InitdbModule> }>,
    ])
    return { module: await WebAssembly.compile(wasm as Uint8Array<ArrayBuffer>), factory: initdbGlue.default }
  }
  return {
    pgliteWasm: await WebAssembly.compile(pgliteWasm as Uint8Array<ArrayBuffer>),
    // The glue checks for a plain ArrayBuffer of the exact size: copy out of
    // Node's Buffer, which may be a view into a larger pool.
    pgliteData: data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer,
    postgresFactory: glue.default,
    engineVersion,
    initdb,
  }
}
