import { locateEngine } from '../engine/loading/assets.js'
import { EngineError } from '../errors.js'
import type { ContribExtension } from './contrib-types.js'

const BUNDLE_NAME = /^[A-Za-z0-9_-]+$/

/** The gzipped tarball of a contrib bundle, read from the engine package's dist (Node). */
export async function bundleBytes(extension: ContribExtension): Promise<Uint8Array> {
  const file = await bundleFile(extension)
  const { readFile } = await import('node:fs/promises')
  try {
    return await readFile(file)
  } catch (cause) {
    throw new EngineError(`contrib bundle ${extension.bundle} cannot be read from ${file}`, { code: 'ASSET_MISSING', cause })
  }
}

async function bundleFile(extension: ContribExtension): Promise<string> {
  if (extension.bundlePath !== undefined) {
    const { fileURLToPath } = await import('node:url')
    const path = extension.bundlePath
    return path instanceof URL || path.startsWith('file:') ? fileURLToPath(path) : path
  }
  // The name becomes a file name: refuse anything that could leave dist/.
  if (!BUNDLE_NAME.test(extension.bundle)) {
    throw new EngineError(`contrib bundle name ${JSON.stringify(extension.bundle)} is not a bundle name`, { code: 'ASSET_MISSING' })
  }
  const [{ join }, { dist }] = await Promise.all([import('node:path'), locateEngine()])
  return join(dist, `${extension.bundle}.tar.gz`)
}
