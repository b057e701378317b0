import type { PostgresModule } from '../emscripten.js'
import { nodeBuiltin } from '../node-builtin.js'

/**
 * What a clean shutdown of a directory database leaves for its next start,
 * so that reopening it skips work whose result is already known:
 * - Postgres removes every relation cache init file (`global/pg_internal.init`
 *   and one per database) at each start, since WAL replay could leave them
 *   out of date, and rebuilds them from the catalogs. Its own comment grants
 *   they could stay after a clean shutdown: here they stay then.
 * - The caller's note (PGlite keeps the catalog's array types there, which it
 *   would otherwise query at every open).
 * The marker is trusted only when nothing has started the cluster since it
 * was written: pg_control's head (state, time of the last update, checkpoint
 * location) must be the one it recorded, the state a clean shutdown, no
 * `backup_label` or recovery signal may ask for recovery, the engine build
 * must be the same (the init files' layout is the binary's), and each init
 * file must hash as it did. It is removed as the start reads it: it speaks
 * for one start only. Otherwise Postgres starts as it always does.
 */

/** In the data directory's root; Postgres ignores files it does not know there. */
export const CLEAN_SHUTDOWN_MARKER = '.pgwasm-clean-shutdown'
const INIT_FILE = 'pg_internal.init'
/** pg_control's head: system identifier, versions, state, last update time, checkpoint location. */
const CONTROL_HEAD = 40
/** `DBState` DB_SHUTDOWNED, at byte 16 of pg_control. */
const DB_SHUTDOWNED = 1
const STATE_OFFSET = 16
const RECOVERY_FILES = ['backup_label', 'recovery.signal', 'standby.signal']

interface Marker {
  engine: string
  /** Hex of pg_control's first {@link CONTROL_HEAD} bytes after the shutdown. */
  control: string
  /** Init file path, relative to the data directory -> SHA-256 (hex). */
  initFiles: Record<string, string>
  note?: string
}

/** What the marker lets this start reuse; nothing when it is absent or not to be trusted. */
export interface CleanStart {
  /** Init files Postgres may keep through this start (paths relative to the data directory). */
  readonly keptInitFiles: ReadonlySet<string>
  /** The note the last clean shutdown recorded. */
  readonly note: string | undefined
}

const NOTHING: CleanStart = { keptInitFiles: new Set(), note: undefined }

type NodeFs = typeof import('node:fs')
type NodeCrypto = typeof import('node:crypto')

function sha256(bytes: Uint8Array): string {
  return nodeBuiltin<NodeCrypto>('node:crypto').createHash('sha256').update(bytes).digest('hex')
}

/** pg_control's head as hex, and whether it says the cluster was shut down cleanly. */
function controlHead(fs: NodeFs, dir: string): { head: string; clean: boolean } {
  const control = fs.readFileSync(`${dir}/global/pg_control`).subarray(0, CONTROL_HEAD)
  return { head: control.toString('hex'), clean: control.length === CONTROL_HEAD && control.readUInt32LE(STATE_OFFSET) === DB_SHUTDOWNED }
}

/** The init files present under `dir`, relative paths. */
function initFiles(fs: NodeFs, dir: string): string[] {
  const out: string[] = []
  if (fs.existsSync(`${dir}/global/${INIT_FILE}`)) out.push(`global/${INIT_FILE}`)
  let databases: string[] = []
  try {
    databases = fs.readdirSync(`${dir}/base`)
  } catch {
    return out
  }
  for (const db of databases) if (fs.existsSync(`${dir}/base/${db}/${INIT_FILE}`)) out.push(`base/${db}/${INIT_FILE}`)
  return out
}

/** Reads and removes the marker of the last clean shutdown; see the module comment for when it is trusted. */
export function readCleanShutdown(dir: string, engineVersion: string): CleanStart {
  const fs = nodeBuiltin<NodeFs>('node:fs')
  const markerPath = `${dir}/${CLEAN_SHUTDOWN_MARKER}`
  let marker: Marker
  try {
    marker = JSON.parse(fs.readFileSync(markerPath, 'utf8')) as Marker
    fs.rmSync(markerPath, { force: true })
  } catch {
    return NOTHING
  }
  try {
    if (marker.engine !== engineVersion || typeof marker.initFiles !== 'object' || marker.initFiles === null) return NOTHING
    const { head, clean } = controlHead(fs, dir)
    if (!clean || head !== marker.control) return NOTHING
    if (RECOVERY_FILES.some((name) => fs.existsSync(`${dir}/${name}`))) return NOTHING
    const kept = new Set<string>()
    for (const path of initFiles(fs, dir)) {
      if (marker.initFiles[path] !== sha256(fs.readFileSync(`${dir}/${path}`))) return NOTHING
      kept.add(path)
    }
    return { keptInitFiles: kept, note: typeof marker.note === 'string' ? marker.note : undefined }
  } catch {
    return NOTHING
  }
}

/** After a clean shutdown: the marker for the next start. */
export function recordCleanShutdown(dir: string, engineVersion: string, note: string | undefined): void {
  const fs = nodeBuiltin<NodeFs>('node:fs')
  const { head, clean } = controlHead(fs, dir)
  if (!clean) return
  const files: Record<string, string> = {}
  for (const path of initFiles(fs, dir)) files[path] = sha256(fs.readFileSync(`${dir}/${path}`))
  const marker: Marker = { engine: engineVersion, control: head, initFiles: files, ...(note === undefined ? {} : { note }) }
  fs.writeFileSync(`${dir}/${CLEAN_SHUTDOWN_MARKER}`, JSON.stringify(marker))
}

/**
 * Runs `start` (Postgres' start-up) with unlinks of the `kept` init files
 * (paths relative to `mountPoint`) skipped; every other unlink, and every
 * unlink after the start (a catalog change still removes them), goes through.
 */
export function withInitFilesKept<T>(mod: PostgresModule, mountPoint: string, kept: ReadonlySet<string>, start: () => T): T {
  if (kept.size === 0) return start()
  const fs = mod.FS as unknown as { unlink(path: string): void }
  const unlink = fs.unlink
  const skipped = new Set([...kept].map((path) => `${mountPoint}/${path}`))
  fs.unlink = (path: string) => {
    if (!skipped.has(path)) unlink.call(fs, path)
  }
  try {
    return start()
  } finally {
    fs.unlink = unlink
  }
}
