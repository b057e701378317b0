import type { InitdbModule, ModuleFactory, PostgresModule } from './emscripten.js'
import { EngineError } from '../errors.js'

/**
 * The engine files taken from `@electric-sql/pglite` (the pinned version in
 * package.json). Compiled and read once per process, shared by every instance.
 */
export interface EngineAssets {
  pgliteModule: WebAssembly.Module
  /** initdb is needed once per template: compiled on first use only. */
  initdb(): Promise<{ module: WebAssembly.Module; factory: ModuleFactory<InitdbModule> }>
  /** `pglite.data`; the same buffer is handed to every instance (read-only files). */
  pgliteData: ArrayBuffer
  postgresFactory: ModuleFactory<PostgresModule>
  /** Identifies the engine build; part of every template cache key. */
  engineVersion: string
}

let assetsPromise: Promise<EngineAssets> | undefined

/** Loads and compiles the engine once per process. */
export function loadAssets(): Promise<EngineAssets> {
  assetsPromise ??= loadNodeAssets().catch((err: unknown) => {
    assetsPromise = undefined
    throw err
  })
  return assetsPromise
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

async function loadNodeAssets(): Promise<EngineAssets> {
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
  const pgliteModule = await WebAssembly.compile(pgliteWasm as Uint8Array<ArrayBuffer>)
  let initdb: ReturnType<EngineAssets['initdb']> | undefined
  const loadInitdb = async (): ReturnType<EngineAssets['initdb']> => {
    const [wasm, initdbGlue] = await Promise.all([
      read('initdb.wasm'),
      import(pathToFileURL(join(dist, 'initdb.js')).href) as Promise<{ default: ModuleFactory<InitdbModule> }>,
    ])
    return { module: await WebAssembly.compile(wasm as Uint8Array<ArrayBuffer>), factory: initdbGlue.default }
  }
  // The glue checks for a plain ArrayBuffer of the exact size: copy out of
  // Node's Buffer, which may be a view into a larger pool.
  const pgliteData = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer
  return {
    pgliteModule,
    initdb: () => (initdb ??= loadInitdb()),
    pgliteData,
    postgresFactory: glue.default,
    engineVersion,
  }
}
