import type { InitdbModule, ModuleFactory, PostgresModule } from '../emscripten.js'
import { EngineError } from '../engine-error.js'
import type { DataTree } from '../files/pgdata-tree.js'
import type { LazyFiles } from './lazy-files.js'
import type { GuardRecords } from '../hooks/session-guards.js'
import { unpackGzippedImage } from '../files/tree-image.js'
import { addInterruptPolls, pollSlotOf } from './interrupt-polls.js'
import { applyWasmTieringBudget } from './wasm-tiering.js'

/**
 * The engine files as this platform reads them. This is the Node source
 * (files of the pinned `@electric-sql/pglite` in node_modules); the browser
 * build swaps in `engine-files.browser.ts`, which fetches them as assets.
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
  /** Where the guarded settings' records are in this engine build (see session-guards.ts). */
  readonly guardRecords?: GuardRecords
  /** The function-table slot of the engine's interrupt poll (interrupt-polls.ts). */
  readonly interruptPollSlot: number
  /** Where `pgliteData` is not all there yet: its files fetched on first use (browser; lazy-files.ts). */
  readonly lazyFiles?: LazyFiles
}

/**
 * Starts unpacking the shipped template early, so it overlaps with compiling
 * the engine. In Node the template is read only when a create needs one
 * that is not in the disk cache's snapshot already.
 */
export function prefetchBundledTemplate(_source: EngineSource): void {}

/** Where the engine files come from, when the caller chose (browser only). */
export interface EngineSource {
  /** Base URL the browser build loads `pglite.wasm`, `pglite.data`... from, instead of `assets/` beside its script. */
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
      // locate dist/ through an exported asset (docs/engine.md).
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
  const [{ readWhole }, { join }, { pathToFileURL }] = await Promise.all([
    import('../start/template-disk.js'),
    import('node:path'),
    import('node:url'),
  ])
  const { dist, engineVersion } = await locateEngine()
  const read = async (name: string): Promise<Uint8Array> => {
    try {
      return await readWhole(join(dist, name))
    } catch (cause) {
      throw new EngineError(`cannot read engine asset ${join(dist, name)}`, { code: 'ASSET_MISSING', cause })
    }
  }
  applyWasmTieringBudget()
  // Compiling (~40 ms, on V8's background threads) starts as soon as the bytes
  // are in, while this thread loads the glue and the shipped template's manifest.
  const polled = readPolledEngine(engineVersion, read)
  const compiling = polled.then(({ bytes }) => WebAssembly.compile(bytes))
  compiling.catch(() => {})
  const [data, glue] = await Promise.all([
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
  const shipped = await readShippedTemplate(engineVersion)
  return {
    ...shipped,
    pgliteWasm: await compiling,
    interruptPollSlot: (await polled).pollSlot,
    // The glue checks for a plain ArrayBuffer of the exact size: a whole-file read has one, else copy out of the larger one.
    pgliteData: (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength
      ? data.buffer
      : data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)) as ArrayBuffer,
    postgresFactory: glue.default,
    engineVersion,
    initdb,
  }
}

/**
 * The engine binary with its interrupt checks polling the host
 * (interrupt-polls.ts). The package build writes it beside the bundle for
 * the engine version it was made from (scripts/make-template.ts), so
 * an installed package reads it as is; running from source, or beside
 * another engine version, the rewrite is done here (about 8 ms).
 */
async function readPolledEngine(engineVersion: string, read: (name: string) => Promise<Uint8Array>): Promise<{ bytes: Uint8Array<ArrayBuffer>; pollSlot: number }> {
  const { readWhole } = await import('../start/template-disk.js')
  const { fileURLToPath } = await import('node:url')
  const shipped = await readWhole(fileURLToPath(new URL(polledEngineFile(engineVersion), import.meta.url))).catch(() => undefined)
  const pollSlot = shipped && pollSlotOf(shipped)
  if (shipped && pollSlot !== undefined) return { bytes: shipped as Uint8Array<ArrayBuffer>, pollSlot }
  try {
    return addInterruptPolls(await read('pglite.wasm'))
  } catch (cause) {
    if (cause instanceof EngineError) throw cause
    throw new EngineError('the engine binary is not shaped as pgwasm expects: its interrupt checks cannot be made to poll', { code: 'ASSET_MISSING', cause })
  }
}

/** Where the package build puts the rewritten engine binary, relative to the bundle (scripts/build-browser.mjs). */
function polledEngineFile(engineVersion: string): string {
  return `./engine/${engineVersion}.polled.wasm`
}

/** Where the package build puts the default template (scripts/build-browser.mjs): dist/engine/ beside the bundle. */
const SHIPPED_TEMPLATE = './engine/default-template'

/**
 * The default initdb result the package ships, when it was made for the
 * engine build found: a fresh install's first create() then starts from it
 * instead of running initdb in the user's process (~2.5 s and ~500 MB of
 * peak memory). Absent when running from source or when the engine package
 * is another version than the one the template was made with; the disk
 * cache and initdb serve those.
 */
async function readShippedTemplate(engineVersion: string): Promise<Pick<EngineFiles, 'bundledTemplate' | 'bundledArrayTypes' | 'guardRecords'>> {
  const { readFile } = await import('node:fs/promises')
  const { fileURLToPath } = await import('node:url')
  const file = (ext: string): string => fileURLToPath(new URL(`${SHIPPED_TEMPLATE}.${ext}`, import.meta.url))
  let manifest: { engineVersion?: unknown; arrayTypes?: unknown; guardRecords?: unknown }
  try {
    manifest = JSON.parse(await readFile(file('json'), 'utf8')) as typeof manifest
  } catch {
    return {}
  }
  if (manifest.engineVersion !== engineVersion || !Array.isArray(manifest.arrayTypes)) return {}
  let tree: Promise<DataTree> | undefined
  return {
    bundledTemplate: () => {
      tree ??= readFile(file('pgwt.gz')).then(
        (gz) => unpackGzippedImage(gz),
        (cause: unknown) => {
          tree = undefined
          throw new EngineError(`cannot read the shipped template ${file('pgwt.gz')}`, { code: 'ASSET_MISSING', cause })
        },
      )
      return tree
    },
    bundledArrayTypes: manifest.arrayTypes as readonly (readonly [number, number, string])[],
    // Checked against the engine before use; a wrong one only costs the search.
    ...(typeof manifest.guardRecords === 'object' && manifest.guardRecords !== null ? { guardRecords: manifest.guardRecords as GuardRecords } : {}),
  }
}
