/**
 * Data-directory tarballs: what `dumpDataDir()` writes and the `loadDataDir`
 * option reads, in the format of `@electric-sql/pglite` (docs/engine.md), so
 * dumps move both ways between the two. Browser-safe.
 */
import { EngineError, IncompatibleDataDirError } from '../errors.js'
import type { DataTree, TreeEntry } from '../engine/files/pgdata-tree.js'
import { gunzip, gzip } from '../engine/files/gzip.js'
import { TarError, isGzip, packTar, unpackTar } from '../engine/files/tar.js'

/** How `dumpDataDir` compresses: `'auto'` is gzip (every supported runtime has it). */
export type DumpCompression = 'gzip' | 'none' | 'auto'

/** A data-directory tarball as `loadDataDir` accepts it: a `File`/`Blob` from `dumpDataDir`, or its bytes. */
export type DataDirArchive = Blob | Uint8Array | ArrayBuffer

/** PostgreSQL major version of the engine; keep in sync with `ENGINE_PG_MAJOR` in node-dir.ts (Node-only). */
const ENGINE_PG_MAJOR = '18'

/**
 * Files that describe the process that had the directory open, not the
 * database: PGlite's dumps carry its `postmaster.pid`, and a stale one makes
 * Postgres refuse to start.
 */
const PROCESS_FILES = new Set(['postmaster.pid', 'postmaster.opts'])

const GZIP_TYPES = new Set(['application/x-gtar', 'application/x-tar+gzip', 'application/x-gzip', 'application/gzip'])

/**
 * Packs a data directory read after a CHECKPOINT into a `File` named
 * `<name>.tar.gz` (`application/x-gzip`) or `<name>.tar` (`application/x-tar`);
 * a `Blob` where `File` does not exist.
 */
export async function packDataDir(tree: DataTree, name: string, compression: DumpCompression = 'auto'): Promise<Blob> {
  if (compression !== 'gzip' && compression !== 'none' && compression !== 'auto') {
    throw new TypeError(`compression must be 'gzip', 'none' or 'auto', not ${JSON.stringify(compression)}`)
  }
  const tar = packTar(tree.filter((entry) => !PROCESS_FILES.has(entry.path)))
  const zipped = compression !== 'none'
  const bytes = zipped ? await gzip(tar) : tar
  const fileName = `${name}${zipped ? '.tar.gz' : '.tar'}`
  const type = zipped ? 'application/x-gzip' : 'application/x-tar'
  const parts: BlobPart[] = [bytes as Uint8Array<ArrayBuffer>]
  return typeof File === 'function' ? new File(parts, fileName, { type }) : new Blob(parts, { type })
}

/** The dump's base name: the data directory's last path segment, `pgdata` in memory (as PGlite). */
export function dumpName(dataDir: string | undefined): string {
  if (!dataDir || dataDir.startsWith('memory://')) return 'pgdata'
  const path = dataDir.startsWith('file://') ? dataDir.slice('file://'.length) : dataDir
  const last = path.split(/[\\/]+/).filter(Boolean).pop()
  return last ?? 'pgdata'
}

/**
 * Reads a tarball into a data tree ready to boot from. gzip is recognised by
 * its magic bytes, so a renamed or untyped file loads too; the MIME type and
 * name only improve the error message when the bytes are not a tarball.
 * @throws {EngineError} `BAD_DATA_DIR` when the archive is not a data directory.
 * @throws {IncompatibleDataDirError} when it is another PostgreSQL major version's.
 */
export async function readDataDirArchive(archive: DataDirArchive): Promise<DataTree> {
  let bytes = await archiveBytes(archive)
  const label = archiveLabel(archive)
  const zipped = isGzip(bytes)
  if (zipped) {
    try {
      bytes = await gunzip(bytes)
    } catch (cause) {
      throw new EngineError(`loadDataDir: ${label} is not a valid gzip stream`, { code: 'BAD_DATA_DIR', cause })
    }
  }
  let entries: TreeEntry[]
  try {
    entries = unpackTar(bytes)
  } catch (cause) {
    const reason = cause instanceof TarError ? cause.message : String(cause)
    const hint = !zipped && claimsGzip(archive) ? '; it is named or typed as gzip but its bytes are not gzip' : ''
    throw new EngineError(`loadDataDir: ${label} is not a tar archive (${reason}${hint})`, { code: 'BAD_DATA_DIR', cause })
  }
  const tree = stripTopDirectory(entries).filter((entry) => !PROCESS_FILES.has(entry.path))
  const version = tree.find((entry) => entry.path === 'PG_VERSION')?.data
  if (!version) {
    throw new EngineError(`loadDataDir: ${label} holds no PostgreSQL data directory (no PG_VERSION)`, { code: 'BAD_DATA_DIR' })
  }
  const major = new TextDecoder().decode(version).trim()
  if (major !== ENGINE_PG_MAJOR) {
    throw new IncompatibleDataDirError(
      `loadDataDir: ${label} is a PostgreSQL ${major} data directory; this engine is PostgreSQL ${ENGINE_PG_MAJOR} (load a SQL dump instead)`,
      { path: label, dataDirVersion: major, engineVersion: ENGINE_PG_MAJOR },
    )
  }
  return tree
}

async function archiveBytes(archive: DataDirArchive): Promise<Uint8Array> {
  if (archive instanceof Uint8Array) return archive
  if (archive instanceof ArrayBuffer) return new Uint8Array(archive)
  if (typeof Blob === 'function' && archive instanceof Blob) return new Uint8Array(await archive.arrayBuffer())
  throw new TypeError('loadDataDir must be a File, Blob, Uint8Array or ArrayBuffer')
}

function archiveLabel(archive: DataDirArchive): string {
  const name = (archive as { name?: unknown }).name
  return typeof name === 'string' && name ? `\`${name}\`` : 'the archive'
}

function claimsGzip(archive: DataDirArchive): boolean {
  const { name, type } = archive as { name?: unknown; type?: unknown }
  return (
    (typeof type === 'string' && GZIP_TYPES.has(type)) ||
    (typeof name === 'string' && (name.endsWith('.tar.gz') || name.endsWith('.tgz')))
  )
}

/**
 * A tarball made with `tar -czf x.tgz pgdata/` has the cluster one level
 * down; PGlite's and ours have it at the root. Accept both.
 */
function stripTopDirectory(entries: TreeEntry[]): TreeEntry[] {
  if (entries.some((entry) => entry.path === 'PG_VERSION')) return entries
  const tops = new Set(entries.map((entry) => entry.path.split('/')[0]!))
  if (tops.size !== 1) return entries
  const [top] = tops
  const prefix = `${top}/`
  if (!entries.some((entry) => entry.path === `${prefix}PG_VERSION`)) return entries
  return entries.filter((entry) => entry.path.startsWith(prefix)).map((entry) => ({ ...entry, path: entry.path.slice(prefix.length) }))
}
