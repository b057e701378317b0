/**
 * What installing contrib bundles writes into an engine module, kept in the
 * disk cache (Node): the bundles' files, and their side modules as
 * installed (rewritten to poll for interrupts, their unused exports
 * dropped). A new process's first database with extensions then reads one
 * file instead of unpacking the bundles and rewriting the modules: ~140 ms
 * of its CPU for the four bundles pg_trgm, hstore, pgcrypto and citext,
 * most of it in JavaScript not yet optimized in a new process (reading
 * pgcrypto's 8,842 export names alone).
 *
 * Keyed by a digest of the bundles' bytes (contrib-digest.ts); the poll
 * slot the modules were rewritten for is kept inside and checked.
 */
import { readCacheEntry, writeCacheEntry } from '../engine/start/contrib-disk.js'
import { inNode } from '../engine/node-builtin.js'
import { contribDigest } from './contrib-digest.js'
import type { ContribExtension } from './contrib-types.js'

/**
 * Bump when what an install holds changes: the side modules' rewrite
 * (engine/loading/interrupt-polls.ts) or trim (engine/hooks/side-module-exports.ts), or
 * this encoding.
 */
const FORMAT = 1
const MAGIC = 'PGWINST1'

/** One thing an install writes, under the install prefix (`/pglite`). */
export type InstallEntry =
  | { readonly kind: 'dir'; readonly path: string }
  | { readonly kind: 'file'; readonly path: string; readonly data: Uint8Array }
  /** A side module, preloaded before Postgres starts unless `lazy` (compiled when Postgres first loads it). */
  | { readonly kind: 'module'; readonly path: string; readonly data: Uint8Array; readonly lazy: boolean }

export interface PreparedInstall {
  /** The function-table slot the modules' interrupt checks call (engine/loading/interrupt-polls.ts); undefined: not rewritten. */
  readonly pollSlot: number | undefined
  readonly entries: readonly InstallEntry[]
}

interface Header {
  pollSlot: number | null
  entries: { kind: InstallEntry['kind']; path: string; size: number; lazy?: boolean }[]
}

/** The install of `contrib` the disk cache at `cacheDir` (default: the templates') keeps, or undefined (none, not Node, or unreadable). */
export async function readInstalled(contrib: readonly ContribExtension[], cacheDir: string | undefined): Promise<PreparedInstall | undefined> {
  try {
    const id = await entryId(contrib)
    const bytes = id === undefined ? undefined : await readCacheEntry(id, 'contrib', cacheDir)
    return bytes && decode(bytes)
  } catch {
    return undefined
  }
}

/** Keeps `install` of `contrib` in the disk cache; a failed write costs the next process its head start only. */
export async function saveInstalled(contrib: readonly ContribExtension[], install: PreparedInstall, cacheDir: string | undefined): Promise<void> {
  try {
    const id = await entryId(contrib)
    if (id !== undefined) await writeCacheEntry(id, 'contrib', encode(install), cacheDir)
  } catch {
    // An unwritable cache: the next process unpacks the bundles again.
  }
}

async function entryId(contrib: readonly ContribExtension[]): Promise<string | undefined> {
  if (!inNode) return undefined
  const digest = await contribDigest(contrib)
  return digest === undefined ? undefined : JSON.stringify([FORMAT, 'contrib-install', digest])
}

function encode(install: PreparedInstall): Uint8Array {
  const header: Header = {
    pollSlot: install.pollSlot ?? null,
    entries: install.entries.map((e) =>
      e.kind === 'dir' ? { kind: e.kind, path: e.path, size: 0 } : { kind: e.kind, path: e.path, size: e.data.byteLength, ...(e.kind === 'module' ? { lazy: e.lazy } : {}) },
    ),
  }
  const json = new TextEncoder().encode(JSON.stringify(header))
  let total = 12 + json.byteLength
  for (const e of install.entries) if (e.kind !== 'dir') total += e.data.byteLength
  const out = new Uint8Array(total)
  out.set(new TextEncoder().encode(MAGIC), 0)
  new DataView(out.buffer).setUint32(8, json.byteLength, true)
  out.set(json, 12)
  let at = 12 + json.byteLength
  for (const e of install.entries) {
    if (e.kind === 'dir') continue
    out.set(e.data, at)
    at += e.data.byteLength
  }
  return out
}

/** @throws Error when the bytes are not an install of this format. */
function decode(bytes: Uint8Array): PreparedInstall {
  if (bytes.byteLength < 12 || new TextDecoder().decode(bytes.subarray(0, 8)) !== MAGIC) throw new Error('not a pgwasm contrib install')
  const jsonLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(8, true)
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + jsonLength))) as Header
  let at = 12 + jsonLength
  const entries = header.entries.map((e): InstallEntry => {
    if (e.kind === 'dir') return { kind: 'dir', path: e.path }
    if (!Number.isInteger(e.size) || e.size < 0 || at + e.size > bytes.byteLength) throw new Error(`install entry ${e.path} runs past the end`)
    // Shared with the file's buffer: an install's bytes are never written to (a module's file gets a copy).
    const data = bytes.subarray(at, at + e.size)
    at += e.size
    return e.kind === 'module' ? { kind: 'module', path: e.path, data, lazy: e.lazy === true } : { kind: 'file', path: e.path, data }
  })
  if (at !== bytes.byteLength) throw new Error(`install is ${bytes.byteLength} bytes, its header describes ${at}`)
  return { pollSlot: header.pollSlot ?? undefined, entries }
}
