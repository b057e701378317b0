import type { InitdbModule, ModuleFactory, PostgresModule } from './emscripten.js'
import { EngineError } from '../errors.js'

/**
 * The engine files taken from `@electric-sql/pglite` (the pinned version in
 * package.json). Compiled and read once per process, shared by every instance.
 */
export interface EngineAssets {
  pgliteModule: WebAssembly.Module
  initdbModule: WebAssembly.Module
  /** `pglite.data`; the same buffer is handed to every instance (read-only files). */
  pgliteData: ArrayBuffer
  postgresFactory: ModuleFactory<PostgresModule>
  initdbFactory: ModuleFactory<InitdbModule>
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

async function loadNodeAssets(): Promise<EngineAssets> {
  const [{ createRequire }, { readFile }, { dirname, join }, { pathToFileURL }] = await Promise.all([
    import('node:module'),
    import('node:fs/promises'),
    import('node:path'),
    import('node:url'),
  ])
  const require = createRequire(import.meta.url)
  let dist: string
  let version: string
  try {
    // The package's export map lists the wasm files but not the glue, so
    // locate dist/ through an exported asset (wasm-abi.md §2.1).
    dist = dirname(require.resolve('@electric-sql/pglite/pglite.wasm'))
    const pkg = JSON.parse(await readFile(join(dist, '..', 'package.json'), 'utf8')) as { version: string }
    version = pkg.version
  } catch (cause) {
    throw new EngineError('cannot find the engine package `@electric-sql/pglite`', { code: 'ASSET_MISSING', cause })
  }
  const read = async (name: string): Promise<Uint8Array> => {
    try {
      return await readFile(join(dist, name))
    } catch (cause) {
      throw new EngineError(`cannot read engine asset ${join(dist, name)}`, { code: 'ASSET_MISSING', cause })
    }
  }
  const [pgliteWasm, initdbWasm, data, glue, initdbGlue] = await Promise.all([
    read('pglite.wasm'),
    read('initdb.wasm'),
    read('pglite.data'),
    import(pathToFileURL(join(dist, 'pglite.js')).href) as Promise<{ default: ModuleFactory<PostgresModule> }>,
    import(pathToFileURL(join(dist, 'initdb.js')).href) as Promise<{ default: ModuleFactory<InitdbModule> }>,
  ])
  const [pgliteModule, initdbModule] = await Promise.all([
    WebAssembly.compile(pgliteWasm as Uint8Array<ArrayBuffer>),
    WebAssembly.compile(initdbWasm as Uint8Array<ArrayBuffer>),
  ])
  // The glue checks for a plain ArrayBuffer of the exact size: copy out of
  // Node's Buffer, which may be a view into a larger pool.
  const pgliteData = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer
  return {
    pgliteModule,
    initdbModule,
    pgliteData,
    postgresFactory: glue.default,
    initdbFactory: initdbGlue.default,
    engineVersion: `pglite-${version}`,
  }
}
