import { embeddedEngine, lastAssetBase } from '../engine/loading/asset-source.js'
import { EngineError } from '../errors.js'
import type { ContribExtension } from './contrib-types.js'

const BUNDLE_NAME = /^[A-Za-z0-9_-]+$/

/**
 * The gzipped tarball of a contrib bundle in the browser build, fetched
 * when an instance first uses it: from `contrib/` among the engine's
 * assets, or from the bundle's chunk in the single-file build
 * (`@pgwasm/pglite/embedded`), so a page that uses none downloads none.
 * `bundlePath` fetches a bundle from a URL instead (one built for the same
 * engine, served with the page).
 */
export async function bundleBytes(extension: ContribExtension): Promise<Uint8Array> {
  if (extension.bundlePath !== undefined) return fetchBundle(extension.bundle, String(extension.bundlePath))
  const embedded = embeddedEngine()?.contribBundle(extension.bundle)
  if (embedded) return embedded
  // The name becomes part of a URL: refuse anything that could leave contrib/.
  if (!BUNDLE_NAME.test(extension.bundle)) {
    throw new EngineError(`contrib bundle name ${JSON.stringify(extension.bundle)} is not a bundle name`, { code: 'ASSET_MISSING' })
  }
  return fetchBundle(extension.bundle, new URL(`contrib/${extension.bundle}.tar.gz`, lastAssetBase()).href)
}

async function fetchBundle(name: string, url: string): Promise<Uint8Array> {
  const response = await fetch(url).catch((cause: unknown) => {
    throw new EngineError(`contrib bundle ${name} could not be fetched from ${url}`, { code: 'ASSET_MISSING', cause })
  })
  if (!response.ok) throw new EngineError(`contrib bundle ${name}: ${url} answered ${response.status}`, { code: 'ASSET_MISSING' })
  return new Uint8Array(await response.arrayBuffer())
}
