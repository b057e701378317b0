import type { InitdbModule, ModuleFactory, PostgresModule } from './emscripten.js'
import type { EngineFiles, EngineSource } from './engine-files.js'
import { EngineError } from './engine-error.js'
import { gunzipStream, inflateGzip, unpackGzippedImage } from './tree-image.js'
import type { DataTree } from './pgdata-tree.js'

/**
 * The browser build's engine files. They travel inside the bundle (gzipped,
 * base64) so that a plain `esbuild --bundle --platform=browser` of an app
 * needs no loader flags and no copied files; `assetBaseUrl` loads the same
 * files from a server instead (streamed compile, cacheable by the browser).
 * The build generates the virtual modules (scripts/build-browser.mjs).
 */
export type { EngineFiles, EngineSource } from './engine-files.js'

export async function locateEngine(): Promise<{ dist: string; engineVersion: string }> {
  const { engineVersion } = await import('pgwasm:engine-manifest')
  return { dist: '', engineVersion }
}

type AssetName = 'pglite.wasm' | 'pglite.data' | 'initdb.wasm' | 'template.pgwt.gz'

export async function readEngineFiles(source: EngineSource): Promise<EngineFiles> {
  const manifest = await import('pgwasm:engine-manifest')
  const fetchAsset = source.assetBaseUrl === undefined ? embedded : (name: AssetName) => fromUrl(source.assetBaseUrl!, name, manifest.sizes[name])
  const [pgliteWasm, data, glue] = await Promise.all([
    source.assetBaseUrl === undefined ? compileEmbedded() : fetchAsset('pglite.wasm').then((bytes) => compile(bytes, 'pglite.wasm', source)),
    fetchAsset('pglite.data'),
    import('pgwasm:postgres-glue') as Promise<{ default: ModuleFactory<PostgresModule> }>,
  ])
  return {
    pgliteWasm,
    pgliteData: data.buffer.byteLength === data.byteLength ? (data.buffer as ArrayBuffer) : (data.slice().buffer as ArrayBuffer),
    postgresFactory: glue.default,
    engineVersion: manifest.engineVersion,
    async initdb() {
      const [bytes, initdbGlue] = await Promise.all([
        fetchAsset('initdb.wasm'),
        import('pgwasm:initdb-glue') as Promise<{ default: ModuleFactory<InitdbModule> }>,
      ])
      return { module: await compile(bytes, 'initdb.wasm', source), factory: initdbGlue.default }
    },
    bundledTemplate: () => templateTree(source),
    bundledArrayTypes: manifest.arrayTypes,
    guardRecords: manifest.guardRecords,
    // The build ships pglite.wasm already rewritten (interrupt-polls.ts).
    interruptPollSlot: manifest.interruptPollSlot,
  }
}

const templates = new Map<string, Promise<DataTree>>()

function templateTree(source: EngineSource): Promise<DataTree> {
  const key = source.assetBaseUrl ?? ''
  let tree = templates.get(key)
  if (!tree) {
    tree = (async () => {
      const gz =
        source.assetBaseUrl === undefined
          ? base64Bytes((await import('pgwasm:engine-template')).gzipped['template.pgwt.gz'])
          : await fromUrl(source.assetBaseUrl, 'template.pgwt.gz', (await import('pgwasm:engine-manifest')).sizes['template.pgwt.gz'])
      return unpackGzippedImage(gz)
    })()
    tree.catch(() => templates.delete(key))
    templates.set(key, tree)
  }
  return tree
}

export function prefetchBundledTemplate(source: EngineSource): void {
  templateTree(source).catch(() => {
    // Reported by the create() that needs it.
  })
}

async function embedded(name: AssetName): Promise<Uint8Array> {
  const text =
    name === 'initdb.wasm'
      ? (await import('pgwasm:engine-initdb')).gzipped[name]
      : name === 'template.pgwt.gz'
        ? (await import('pgwasm:engine-template')).gzipped[name]
        : (await import('pgwasm:engine-core')).gzipped[name]
  return inflateGzip(base64Bytes(text))
}

/**
 * Decompresses and compiles in one stream: the browser compiles on its own
 * threads while the rest arrives, instead of after it all did. The inflate
 * goes in slices, so the page's thread (and an `idb://` read) is not held
 * for its whole ~100 ms.
 */
async function compileEmbedded(): Promise<WebAssembly.Module> {
  const core = await import('pgwasm:engine-core')
  const gz = base64Bytes(core.gzipped['pglite.wasm'])
  if (typeof WebAssembly.compileStreaming === 'function' && typeof DecompressionStream === 'function') {
    try {
      return await WebAssembly.compileStreaming(new Response(gunzipStream(gz), { headers: { 'content-type': 'application/wasm' } }))
    } catch {
      // Some runtimes refuse a constructed Response: compile the bytes instead.
    }
  }
  return compile(await inflateGzip(gz), 'pglite.wasm', {})
}

async function compile(bytes: Uint8Array, name: AssetName, source: EngineSource): Promise<WebAssembly.Module> {
  try {
    return await WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>)
  } catch (cause) {
    const where = source.assetBaseUrl === undefined ? `the embedded ${name}` : assetUrl(source.assetBaseUrl, name)
    throw new EngineError(`engine asset ${where} is not the engine's WebAssembly: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
  }
}

function assetUrl(base: string, name: AssetName): string {
  const root = typeof location === 'undefined' ? undefined : location.href
  return new URL(name, new URL(base.endsWith('/') ? base : `${base}/`, root)).href
}

/** Fetches one asset; any failure names the URL and why, never hangs on a stalled server past the browser's own limits. */
async function fromUrl(base: string, name: AssetName, expected: number): Promise<Uint8Array> {
  const url = assetUrl(base, name)
  let response: Response
  try {
    response = await fetch(url)
  } catch (cause) {
    throw new EngineError(`cannot load engine asset ${url}: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
  }
  if (!response.ok) {
    throw new EngineError(`cannot load engine asset ${url}: HTTP ${response.status} ${response.statusText}`.trim(), { code: 'ASSET_MISSING' })
  }
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

type Base64Decoder = { fromBase64?: (text: string) => Uint8Array }

/** Bytes of base64 `text` (the embedded assets). */
export function base64Bytes(text: string): Uint8Array {
  const native = (Uint8Array as unknown as Base64Decoder).fromBase64
  if (native) return native(text)
  const binary = atob(text)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}
