import type { InitdbModule, ModuleFactory, PostgresModule } from '../emscripten.js'
import type { EngineFiles } from './engine-files.js'
import { useEmbeddedEngine } from './asset-source.js'
import { EngineError } from '../engine-error.js'
import type { DataTree } from '../files/pgdata-tree.js'
import { gunzipStream, inflateGzip, unpackGzippedImage } from '../files/tree-image.js'

/**
 * The single-file build (`@pgwasm/pglite/embedded`): the engine files
 * travel inside the bundle, gzipped and base64, so that a plain bundler
 * run needs no served files at all, at about twice the download of the
 * default build (docs/engine.md). Each group is a module of its own,
 * read when first needed: a reopen or a snapshot restore never parses the
 * template's text, and a contrib bundle's chunk is loaded only by an
 * instance that uses it. The build generates the modules
 * (scripts/build-browser.mjs).
 */
let files: Promise<EngineFiles> | undefined

useEmbeddedEngine({
  readEngineFiles: () => (files ??= readEmbedded()),
  contribBundle(name) {
    return import('pgwasm:contrib-bundles').then(async ({ loaders }) => {
      const load = Object.hasOwn(loaders, name) ? loaders[name] : undefined
      if (!load) throw new EngineError(`contrib bundle ${JSON.stringify(name)} is not one the engine ships`, { code: 'ASSET_MISSING' })
      return base64Bytes((await load()).gzipped)
    })
  },
})

async function readEmbedded(): Promise<EngineFiles> {
  const manifest = await import('pgwasm:engine-manifest')
  const [pgliteWasm, data, glue] = await Promise.all([
    compileEmbedded(),
    import('pgwasm:engine-core').then((core) => inflateGzip(base64Bytes(core.gzipped['pglite.data']))),
    import('pgwasm:postgres-glue') as Promise<{ default: ModuleFactory<PostgresModule> }>,
  ])
  let template: Promise<DataTree> | undefined
  return {
    pgliteWasm,
    pgliteData: data.buffer.byteLength === data.byteLength ? (data.buffer as ArrayBuffer) : (data.slice().buffer as ArrayBuffer),
    postgresFactory: glue.default,
    engineVersion: manifest.engineVersion,
    async initdb() {
      const [bytes, initdbGlue] = await Promise.all([
        import('pgwasm:engine-initdb').then((m) => inflateGzip(base64Bytes(m.gzipped['initdb.wasm']))),
        import('pgwasm:initdb-glue') as Promise<{ default: ModuleFactory<InitdbModule> }>,
      ])
      return { module: await compile(bytes), factory: initdbGlue.default }
    },
    bundledTemplate() {
      template ??= import('pgwasm:engine-template').then((m) => unpackGzippedImage(base64Bytes(m.gzipped['template.pgwt.gz'])))
      template.catch(() => {
        template = undefined
      })
      return template
    },
    bundledArrayTypes: manifest.arrayTypes,
    guardRecords: manifest.guardRecords,
    interruptPollSlot: manifest.interruptPollSlot,
  }
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
  return compile(await inflateGzip(gz))
}

async function compile(bytes: Uint8Array): Promise<WebAssembly.Module> {
  try {
    return await WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>)
  } catch (cause) {
    throw new EngineError(`the embedded engine is not WebAssembly this runtime compiles: ${String(cause)}`, { code: 'ASSET_MISSING', cause })
  }
}

type Base64Decoder = { fromBase64?: (text: string) => Uint8Array }

/** Bytes of base64 `text` (the embedded assets). */
function base64Bytes(text: string): Uint8Array {
  const native = (Uint8Array as unknown as Base64Decoder).fromBase64
  if (native) return native(text)
  const binary = atob(text)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}
