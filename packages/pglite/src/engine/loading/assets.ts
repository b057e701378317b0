import type { InitdbModule, ModuleFactory, PostgresModule } from '../emscripten.js'
import { readEngineFiles, type EngineSource } from './engine-files.js'
import type { LazyFiles } from './lazy-files.js'
import type { DataTree } from '../files/pgdata-tree.js'
import type { GuardRecords } from '../hooks/session-guards.js'

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
  /** The shipped initdb result for default options, where the platform has one (the browser build). */
  bundledTemplate?: () => Promise<DataTree>
  /** The array types of the shipped template's catalog (elem, arr, delim), with it. */
  bundledArrayTypes?: readonly (readonly [number, number, string])[]
  /** Where the guarded settings' records are in this engine build, as the package build found them. */
  guardRecords?: GuardRecords
  /** The function-table slot of the engine's interrupt poll (interrupt-polls.ts). */
  interruptPollSlot: number
  /** The files of `pgliteData` fetched on first use, where some are (the browser build's default). */
  lazyFiles?: LazyFiles
}

export { locateEngine, prefetchBundledTemplate } from './engine-files.js'
export type { EngineSource } from './engine-files.js'

const loaded = new Map<string, Promise<EngineAssets>>()

/** Loads and compiles the engine once per process (and per asset base URL). */
export function loadAssets(source: EngineSource = {}): Promise<EngineAssets> {
  const key = source.assetBaseUrl ?? ''
  let assets = loaded.get(key)
  if (!assets) {
    assets = readEngineFiles(source).then((files) => {
      let initdb: ReturnType<EngineAssets['initdb']> | undefined
      return {
        pgliteModule: files.pgliteWasm,
        pgliteData: files.pgliteData,
        postgresFactory: files.postgresFactory,
        engineVersion: files.engineVersion,
        initdb: () =>
          (initdb ??= files.initdb().catch((err: unknown) => {
            initdb = undefined
            throw err
          })),
        bundledTemplate: files.bundledTemplate?.bind(files),
        bundledArrayTypes: files.bundledArrayTypes,
        guardRecords: files.guardRecords,
        interruptPollSlot: files.interruptPollSlot,
        lazyFiles: files.lazyFiles,
      }
    })
    assets.catch(() => loaded.delete(key))
    loaded.set(key, assets)
  }
  return assets
}
