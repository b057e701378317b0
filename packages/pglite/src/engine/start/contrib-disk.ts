/**
 * Snapshots of databases with contrib side modules in the disk cache, so
 * that a new process (a test file's) restores them as it restores a plain
 * database's: the start of `create({ extensions })`, and the state
 * `createCached`'s setup left, `CREATE EXTENSION` scripts included.
 *
 * A snapshot's memory holds the side modules' data where the module that
 * took it had them, and the function-table slots Postgres looked their
 * functions up at. Another process's module is new: it preloads the same
 * bundles (the key holds a digest of each bundle's bytes, which the
 * caller computes), and its side modules' data must end where the
 * snapshot's did (`preparedBreak`, checked on restore), and its lookups,
 * replayed, must take the slots recorded, which only a snapshot of a
 * module that served no other database first guarantees: others are kept
 * in the process only ({@link savedOnDisk}).
 */
import type { BlankModule } from '../backend/blank-module.js'
import { replaysOnNewModule } from './dynamic-links.js'
import type { EngineAssets } from '../loading/assets.js'
import { inNode } from '../node-builtin.js'
import type { EngineSnapshot } from './snapshot.js'
import { decodeSnapshot, encodeSnapshot } from './snapshot-codec.js'

/** Bump when what these entries hold changes (the engine snapshot's own format is in the caller's key). */
const FORMAT = 1

/** How a backend with contrib modules is started, beside its options and bundles. */
export interface ContribStart {
  /** A digest of the bundles' bytes: with it, snapshots are kept in the disk cache too. */
  readonly bundlesDigest?: string
  /**
   * Restore into a module that served no database before, so that what
   * Postgres links next takes the slots a new module would give it, and a
   * snapshot of it can be kept on disk (`createCached`'s setup).
   */
  readonly newModule?: boolean
}

/**
 * Where one entry is kept: the start-up snapshot of these start options
 * (`startKey`) and bundles, or the state saved under `state`. Nowhere
 * without a digest of the bundles.
 */
export function contribDiskId(startKey: string, start: ContribStart, state?: string): string | undefined {
  return start.bundlesDigest === undefined ? undefined : JSON.stringify([FORMAT, 'contrib', startKey, start.bundlesDigest, state ?? null])
}

/** Whether a new module of another process could restore `snapshot` (see the file comment). */
export function savedOnDisk(snapshot: EngineSnapshot): boolean {
  const links = snapshot.links
  return links !== undefined && links.preparedBreak !== undefined && replaysOnNewModule(links, links.preparedTable, snapshot.tableLength)
}

/**
 * Reads of entries, kept: the prefetch's read is what the restore after it
 * finds (the caller keeps the snapshot anyway, so this holds nothing more).
 */
const reads = new Map<string, Promise<EngineSnapshot | undefined>>()

/** The entry `id`, read once per process; undefined when there is none. */
export function readContribSnapshot(id: string, cacheDir: string | false | undefined): Promise<EngineSnapshot | undefined> {
  let read = reads.get(id)
  if (!read) {
    read = load(id, cacheDir).catch(() => undefined)
    reads.set(id, read)
    // None there yet: a later instance looks again (an earlier one may have saved it since).
    void read.then((snapshot) => snapshot ?? reads.delete(id))
  }
  return read
}

async function load(id: string, cacheDir: string | false | undefined): Promise<EngineSnapshot | undefined> {
  const where = await location(id, cacheDir)
  if (!where) return undefined
  const disk = await import('./template-disk.js')
  const bytes = await disk.readVerified(where.file)
  if (!bytes) return undefined
  try {
    return decodeSnapshot(bytes)
  } catch {
    await forgetContribSnapshot(id, cacheDir)
    return undefined
  }
}

/** Writes `snapshot` as the entry `id` when another process could restore it; a failed write costs that process its head start only. */
export async function saveContribSnapshot(id: string, snapshot: EngineSnapshot, cacheDir: string | false | undefined): Promise<void> {
  if (!savedOnDisk(snapshot)) return
  try {
    const where = await location(id, cacheDir)
    if (!where) return
    const disk = await import('./template-disk.js')
    await disk.writeAtomically(where.dir, where.file, encodeSnapshot(snapshot))
  } catch {
    // An unwritable cache: the next process sets the database up again.
  }
}

/** For tests: forget what was read (the entries stay on disk). */
export function forgetContribReads(): void {
  reads.clear()
}

/** Removes the entry `id` (one that did not restore). */
export async function forgetContribSnapshot(id: string, cacheDir: string | false | undefined): Promise<void> {
  reads.delete(id)
  const where = await location(id, cacheDir).catch(() => undefined)
  if (!where) return
  const { unlink } = await import('node:fs/promises')
  await unlink(where.file).catch(() => {})
}

async function location(id: string, cacheDir: string | false | undefined, kind = 'snapshot'): Promise<{ dir: string; file: string } | undefined> {
  if (cacheDir === false || !inNode) return undefined
  const disk = await import('./template-disk.js')
  const dir = cacheDir ?? (await disk.defaultCacheDir())
  return { dir, file: await disk.templatePath(dir, id, kind) }
}

/**
 * The checked bytes of the cache entry `id` of `kind` (the installs of
 * extensions/installed-bundles.ts), or undefined (none, damaged, or no disk
 * cache: a browser, `cacheDir` false).
 */
export async function readCacheEntry(id: string, kind: string, cacheDir: string | false | undefined): Promise<Uint8Array | undefined> {
  const where = await location(id, cacheDir, kind)
  if (!where) return undefined
  const disk = await import('./template-disk.js')
  return disk.readVerified(where.file)
}

/** Writes the cache entry `id` of `kind` whole or not at all. */
export async function writeCacheEntry(id: string, kind: string, bytes: Uint8Array, cacheDir: string | false | undefined): Promise<void> {
  const where = await location(id, cacheDir, kind)
  if (!where) return
  const disk = await import('./template-disk.js')
  await disk.writeAtomically(where.dir, where.file, bytes)
}

/** The part of a pool of modules (starter.ts) a read while making needs. */
interface Pool {
  take(assets: EngineAssets, pages: number): Promise<BlankModule>
  give(blank: BlankModule): void
}

/**
 * `read` (a snapshot from the disk cache) and, meanwhile, a module of
 * `pool` to restore it into: in a new process the read (~40 MB, checked)
 * and the module's creation (~100 ms) took their turns. A module no
 * snapshot came for goes back to the pool, for the start that follows.
 */
export async function readWhileMaking(
  assets: EngineAssets,
  pool: Pool,
  read: Promise<EngineSnapshot | undefined>,
): Promise<[EngineSnapshot | undefined, Promise<BlankModule> | undefined]> {
  const making = pool.take(assets, 1)
  const snapshot = await read
  if (snapshot) return [snapshot, making]
  void making.then((blank) => pool.give(blank), () => {})
  return [undefined, undefined]
}
