import type { InitdbModule, ModuleFactory, PostgresModule } from '../emscripten.js'
import type { EngineFiles, EngineSource } from './engine-files.js'
import { assetBase, embeddedEngine } from './asset-source.js'
import { EngineError } from '../engine-error.js'
import { LazyFiles } from './lazy-files.js'
import { decodeLzmaInSlices } from '../files/lzma.js'
import { setMemoryImage } from './memory-image.js'
import type { DataTree } from '../files/pgdata-tree.js'
import { decodeTreeImage, rememberImage } from '../files/tree-image.js'

/**
 * The browser build's engine files, fetched from `assets/` beside the
 * script (or `assetBaseUrl`; scripts/build-browser.mjs writes them): a
 * first visit fetches the engine's code, compiled while it streams, and
 * `pglite.data` (its memory image and the files every start reads) and,
 * for a new database, the template; the rest when used (lazy-files.ts).
 * The page's `@pgwasm/pglite/embedded` import replaces all of it with the
 * copies inside the bundle (embedded-engine.browser.ts).
 */
export type { EngineFiles, EngineSource } from './engine-files.js'

type AssetName = keyof (typeof import('pgwasm:engine-manifest'))['assetSizes']

export async function locateEngine(): Promise<{ dist: string; engineVersion: string }> {
  const { engineVersion } = await import('pgwasm:engine-manifest')
  return { dist: '', engineVersion }
}

export async function readEngineFiles(source: EngineSource): Promise<EngineFiles> {
  const embedded = embeddedEngine(source)
  if (embedded) return embedded.readEngineFiles()
  const manifest = await import('pgwasm:engine-manifest')
  const base = assetBase(source)
  const settled = await Promise.allSettled([
    compileAsset(base, 'pglite.wasm', manifest.assetSizes['pglite.wasm']),
    fetchAsset(base, 'pglite.data', manifest.assetSizes['pglite.data']).then((bytes) =>
      decodeAsset(base, 'pglite.data', bytes, manifest.memoryImage.bytes + manifest.dataFiles.packSizes[0]![1]),
    ),
    import('pgwasm:postgres-glue') as Promise<{ default: ModuleFactory<PostgresModule> }>,
  ] as const)
  // Reported in this order, whichever failed first: a server missing them all names pglite.wasm.
  for (const result of settled) if (result.status === 'rejected') throw result.reason
  const [wasm, data, glue] = settled as unknown as [PromiseFulfilledResult<WebAssembly.Module>, PromiseFulfilledResult<Uint8Array>, PromiseFulfilledResult<{ default: ModuleFactory<PostgresModule> }>]
  const { base: at, bytes } = manifest.memoryImage
  setMemoryImage(wasm.value, { base: at, bytes: data.value.subarray(0, bytes) })
  let lazyFiles: LazyFiles
  try {
    lazyFiles = new LazyFiles(manifest.dataFiles, data.value.subarray(bytes), (name) => new URL(`share/${name}.lzma`, base).href)
  } catch (cause) {
    throw new EngineError(`engine asset ${new URL('pglite.data', base).href} does not hold the files this build expects`, { code: 'ASSET_MISSING', cause })
  }
  return {
    pgliteWasm: wasm.value,
    pgliteData: lazyFiles.buffer,
    postgresFactory: glue.value.default,
    engineVersion: manifest.engineVersion,
    lazyFiles,
    async initdb() {
      const glueUrl = new URL('initdb.js', base).href
      const [bytes, initdbGlue] = await Promise.all([
        fetchAsset(base, 'initdb.wasm', manifest.assetSizes['initdb.wasm']),
        // Not bundled: a first visit never runs initdb, so its glue is an asset too.
        (import(/* @vite-ignore */ /* webpackIgnore: true */ glueUrl) as Promise<{ default: ModuleFactory<InitdbModule> }>).catch((cause: unknown) => {
          throw new EngineError(`cannot load engine asset ${glueUrl}: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
        }),
        lazyFiles.loadAll().catch((cause: unknown) => {
          throw new EngineError(cause instanceof Error ? cause.message : String(cause), { code: 'ASSET_MISSING', cause })
        }),
      ])
      return { module: await compile(bytes, new URL('initdb.wasm', base).href), factory: initdbGlue.default }
    },
    bundledTemplate: () => templateTree(base),
    bundledArrayTypes: manifest.arrayTypes,
    guardRecords: manifest.guardRecords,
    // The build ships pglite.wasm already rewritten (interrupt-polls.ts).
    interruptPollSlot: manifest.interruptPollSlot,
  }
}

const templates = new Map<string, Promise<DataTree>>()

function templateTree(base: string): Promise<DataTree> {
  let tree = templates.get(base)
  if (!tree) {
    tree = (async () => {
      const manifest = await import('pgwasm:engine-manifest')
      const packed = await fetchAsset(base, 'template.pgwt.lzma', manifest.assetSizes['template.pgwt.lzma'])
      const image = await decodeAsset(base, 'template.pgwt.lzma', packed, manifest.templateBytes)
      const decoded = decodeTreeImage(image)
      rememberImage(decoded, image)
      return decoded
    })()
    tree.catch(() => templates.delete(base))
    templates.set(base, tree)
  }
  return tree
}

/** Starts fetching and unpacking the template early, so it overlaps with compiling the engine. */
export function prefetchBundledTemplate(source: EngineSource): void {
  const embedded = embeddedEngine(source)
  const tree = embedded ? embedded.readEngineFiles().then((files) => files.bundledTemplate?.()) : templateTree(assetBase(source))
  tree.catch(() => {
    // Reported by the create() that needs it.
  })
}

async function decodeAsset(base: string, name: AssetName, packed: Uint8Array, size: number): Promise<Uint8Array> {
  try {
    return await decodeLzmaInSlices(packed, size)
  } catch (cause) {
    throw new EngineError(`engine asset ${new URL(name, base).href} is not the file of this build: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
  }
}

/**
 * Compiles the engine as it downloads (the browser compiles on its own
 * threads while the rest arrives, and caches the result with the
 * response). A server that does not say `application/wasm` gets the
 * bytes read first instead, as does a runtime without streaming compiles.
 */
async function compileAsset(base: string, name: AssetName, expected: number): Promise<WebAssembly.Module> {
  const url = new URL(name, base).href
  const response = await get(url)
  const type = response.headers.get('content-type') ?? ''
  if (typeof WebAssembly.compileStreaming === 'function' && /^application\/wasm\b/i.test(type)) {
    try {
      return await WebAssembly.compileStreaming(response)
    } catch (cause) {
      // Say what arrived: fetched again (from the HTTP cache, mostly) to count it.
      await checkedBytes(await get(url), url, expected)
      throw new EngineError(`engine asset ${url} is not the engine's WebAssembly: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
    }
  }
  return compile(await checkedBytes(response, url, expected), url)
}

async function compile(bytes: Uint8Array, url: string): Promise<WebAssembly.Module> {
  try {
    return await WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>)
  } catch (cause) {
    throw new EngineError(`engine asset ${url} is not the engine's WebAssembly: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
  }
}

async function fetchAsset(base: string, name: AssetName, expected: number): Promise<Uint8Array> {
  const url = new URL(name, base).href
  return checkedBytes(await get(url), url, expected)
}

/** GETs one asset; any failure names the URL and why. */
async function get(url: string): Promise<Response> {
  let response: Response
  try {
    response = await fetch(url)
  } catch (cause) {
    throw new EngineError(`cannot load engine asset ${url}: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
  }
  if (!response.ok) {
    throw new EngineError(`cannot load engine asset ${url}: HTTP ${response.status} ${response.statusText}`.trim(), { code: 'ASSET_MISSING' })
  }
  return response
}

async function checkedBytes(response: Response, url: string, expected: number): Promise<Uint8Array> {
  let bytes: Uint8Array
  try {
    bytes = new Uint8Array(await response.arrayBuffer())
  } catch (cause) {
    throw new EngineError(`cannot load engine asset ${url}: the download failed (${String(cause)})`, { code: 'ASSET_MISSING', cause })
  }
  if (bytes.byteLength !== expected) {
    const type = response.headers.get('content-type') ?? 'no content-type'
    throw new EngineError(
      `engine asset ${url} is ${bytes.byteLength} bytes (${type}), this build expects ${expected}: truncated, or not the file of this version`,
      { code: 'ASSET_MISSING' },
    )
  }
  return bytes
}
