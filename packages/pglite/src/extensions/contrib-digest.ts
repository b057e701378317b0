/**
 * A digest of the contrib bundles an instance installs, for the disk
 * cache's key of its snapshots (engine/start/contrib-disk.ts): a snapshot's
 * memory holds the side modules' data and table slots as those bytes laid
 * them out, so another build of a bundle under the same name or path must
 * not find it. Node only: browsers keep no disk cache.
 */
import { inNode } from '../engine/node-builtin.js'
import { bundleBytes } from './contrib-bundles.js'
import type { ContribExtension } from './contrib-types.js'

/** SHA-256 of each bundle file, by name or path, once per process (pgcrypto's 1.2 MB: ~2 ms). */
const digests = new Map<string, Promise<string>>()

function bundleDigest(extension: ContribExtension): Promise<string> {
  const key = extension.bundlePath === undefined ? extension.bundle : String(extension.bundlePath)
  let digest = digests.get(key)
  if (!digest) {
    digest = Promise.all([bundleBytes(extension), import('node:crypto')]).then(([bytes, { createHash }]) => createHash('sha256').update(bytes).digest('hex'))
    digests.set(key, digest)
    digest.catch(() => digests.delete(key))
  }
  return digest
}

/**
 * One digest of `contrib` as installed: each bundle's bytes and how it is
 * loaded, in order (the order side modules are preloaded in). Undefined
 * outside Node, or when a bundle cannot be read (the install then reports
 * that).
 */
export async function contribDigest(contrib: readonly ContribExtension[]): Promise<string | undefined> {
  if (!inNode || contrib.length === 0) return undefined
  try {
    const each = await Promise.all(contrib.map(async (c) => [c.name, c.loadOnUse === true, c.sharedPreloadLibraries ?? [], await bundleDigest(c)]))
    const { createHash } = await import('node:crypto')
    return createHash('sha256').update(JSON.stringify(each)).digest('hex')
  } catch {
    return undefined
  }
}
