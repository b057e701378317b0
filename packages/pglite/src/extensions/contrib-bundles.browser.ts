import { base64Bytes } from '../engine/engine-files.browser.js'
import { EngineError } from '../errors.js'
import type { ContribExtension } from './contrib-types.js'

/**
 * The gzipped tarball of a contrib bundle in the browser build: the engine's
 * bundles travel inside the build, each in a chunk of its own that is
 * loaded when an instance first uses it (scripts/build-browser.mjs), so a
 * page that uses none carries none. `bundlePath` fetches a bundle from a URL
 * instead (one built for the same engine, served with the page).
 */
export async function bundleBytes(extension: ContribExtension): Promise<Uint8Array> {
  if (extension.bundlePath !== undefined) {
    const url = String(extension.bundlePath)
    const response = await fetch(url).catch((cause: unknown) => {
      throw new EngineError(`contrib bundle ${extension.bundle} could not be fetched from ${url}`, { code: 'ASSET_MISSING', cause })
    })
    if (!response.ok) throw new EngineError(`contrib bundle ${extension.bundle}: ${url} answered ${response.status}`, { code: 'ASSET_MISSING' })
    return new Uint8Array(await response.arrayBuffer())
  }
  const { loaders } = await import('pgwasm:contrib-bundles')
  const load = Object.hasOwn(loaders, extension.bundle) ? loaders[extension.bundle] : undefined
  if (!load) throw new EngineError(`contrib bundle ${JSON.stringify(extension.bundle)} is not one the engine ships`, { code: 'ASSET_MISSING' })
  return base64Bytes((await load()).gzipped)
}
