/**
 * POSIX ustar reader and writer of data trees: the on-disk template, data
 * directory dumps and contrib bundles. Browser-safe: typed arrays and
 * TextEncoder/TextDecoder only.
 */
import { isDirEntry, type DataTree, type TreeEntry } from './pgdata-tree.js'

/** A malformed, truncated or unsupported archive. */
export class TarError extends Error {
  override name = 'TarError'
  readonly code = 'BAD_TAR' as const

  constructor(message: string) {
    super(message)
  }
}

const BLOCK = 512
const S_IFMT = 0o170000
const S_IFDIR = 0o040000
const S_IFREG = 0o100000
/** Mode of a directory that the archive implies but does not list. */
const SYNTH_DIR_MODE = S_IFDIR | 0o700
/** Largest value of an 11-digit octal field (8 GiB - 1). */
const MAX_OCTAL_11 = 0o77777777777

// Header field offsets and widths (POSIX.1-1988 ustar).
const NAME = 0
const NAME_LEN = 100
const MODE = 100
const UID = 108
const GID = 116
const SIZE = 124
const MTIME = 136
const CHKSUM = 148
const TYPEFLAG = 156
const MAGIC = 257
const VERSION = 263
const DEVMAJOR = 329
const DEVMINOR = 337
const PREFIX = 345
const PREFIX_LEN = 155

const USTAR_MAGIC = new Uint8Array([0x75, 0x73, 0x74, 0x61, 0x72, 0x00]) // "ustar\0"

const SLASH = 0x2f
const SPACE = 0x20

const encoder = new TextEncoder()
const decoder = new TextDecoder()

const padded = (size: number): number => Math.ceil(size / BLOCK) * BLOCK

// ---------------------------------------------------------------- writing

/** Writes `value` as zero-padded octal in `width - 1` digits plus a NUL. */
function writeOctal(buf: Uint8Array, at: number, width: number, value: number): void {
  let v = value
  for (let i = at + width - 2; i >= at; i--) {
    buf[i] = 0x30 + (v % 8)
    v = Math.floor(v / 8)
  }
  buf[at + width - 1] = 0
}

/**
 * Splits an encoded name into ustar prefix and name fields. Returns the index
 * of the separating '/' (-1 when the name fits alone).
 */
function splitName(name: Uint8Array, path: string): number {
  const len = name.length
  if (len <= NAME_LEN) return -1
  // The name part must be non-empty, so a directory's trailing '/' never splits.
  const lo = Math.max(len - NAME_LEN - 1, 0)
  const hi = Math.min(PREFIX_LEN, len - 2)
  for (let i = lo; i <= hi; i++) {
    if (name[i] === SLASH) return i
  }
  throw new Error(
    `tar: path too long for ustar (needs a '/' splitting it into <=155 + <=100 bytes): ${path}`,
  )
}

interface Planned {
  readonly entry: TreeEntry
  readonly name: Uint8Array
  readonly split: number
  readonly dir: boolean
  readonly size: number
}

/** Packs `tree` into one ustar archive. */
export function packTar(tree: DataTree): Uint8Array {
  const planned: Planned[] = new Array<Planned>(tree.length)
  let total = 2 * BLOCK
  for (let i = 0; i < tree.length; i++) {
    const entry = tree[i]!
    if (entry.path === '') throw new Error('tar: entry with an empty path')
    const dir = isDirEntry(entry)
    const size = dir ? 0 : (entry.data?.length ?? 0)
    if (size > MAX_OCTAL_11) {
      throw new Error(`tar: file larger than 8 GiB is not supported by ustar: ${entry.path}`)
    }
    const name = encoder.encode(dir ? `${entry.path}/` : entry.path)
    planned[i] = { entry, name, split: splitName(name, entry.path), dir, size }
    total += BLOCK + padded(size)
  }

  const out = new Uint8Array(total)
  let off = 0
  for (const p of planned) {
    writeHeader(out, off, p)
    off += BLOCK
    if (p.size > 0) {
      out.set(p.entry.data!, off)
      off += padded(p.size)
    }
  }
  return out
}

function writeHeader(out: Uint8Array, at: number, p: Planned): void {
  if (p.split < 0) {
    out.set(p.name, at + NAME)
  } else {
    out.set(p.name.subarray(0, p.split), at + PREFIX)
    out.set(p.name.subarray(p.split + 1), at + NAME)
  }
  writeOctal(out, at + MODE, 8, p.entry.mode & 0o7777)
  writeOctal(out, at + UID, 8, 0)
  writeOctal(out, at + GID, 8, 0)
  writeOctal(out, at + SIZE, 12, p.size)
  // Pre-epoch or absurd timestamps cannot be stored in the unsigned field.
  const secs = Math.floor(p.entry.mtimeMs / 1000)
  writeOctal(out, at + MTIME, 12, Number.isFinite(secs) ? Math.min(Math.max(secs, 0), MAX_OCTAL_11) : 0)
  out[at + TYPEFLAG] = p.dir ? 0x35 : 0x30
  out.set(USTAR_MAGIC, at + MAGIC)
  out[at + VERSION] = 0x30
  out[at + VERSION + 1] = 0x30
  writeOctal(out, at + DEVMAJOR, 8, 0)
  writeOctal(out, at + DEVMINOR, 8, 0)

  // The checksum is computed with its own field read as eight spaces.
  let sum = 8 * SPACE
  for (let i = at; i < at + CHKSUM; i++) sum += out[i]!
  for (let i = at + CHKSUM + 8; i < at + BLOCK; i++) sum += out[i]!
  writeOctal(out, at + CHKSUM, 7, sum)
  out[at + CHKSUM + 7] = SPACE
}

// ---------------------------------------------------------------- reading

/** Parses a numeric header field: octal text, or GNU base-256 binary. */
function readNumber(buf: Uint8Array, at: number, width: number, field: string, header: number): number {
  const first = buf[at]!
  if (first === 0x80 || first === 0xff) {
    // Base-256, two's complement; 0xff marks a negative value.
    let v = first === 0xff ? -1 : 0
    for (let i = at + 1; i < at + width; i++) v = v * 256 + buf[i]!
    if (!Number.isSafeInteger(v)) throw new TarError(`tar: ${field} out of range in header at offset ${header}`)
    return v
  }
  let i = at
  const end = at + width
  while (i < end && buf[i] === SPACE) i++
  let v = 0
  for (; i < end; i++) {
    const c = buf[i]!
    if (c < 0x30 || c > 0x37) break
    v = v * 8 + (c - 0x30)
  }
  for (; i < end; i++) {
    const c = buf[i]!
    if (c !== 0 && c !== SPACE) {
      throw new TarError(`tar: non-octal ${field} field in header at offset ${header}`)
    }
  }
  return v
}

function cString(buf: Uint8Array, at: number, width: number): Uint8Array {
  const field = buf.subarray(at, at + width)
  const nul = field.indexOf(0)
  return nul < 0 ? field : field.subarray(0, nul)
}

function hasUstarMagic(buf: Uint8Array, at: number): boolean {
  for (let i = 0; i < USTAR_MAGIC.length; i++) {
    if (buf[at + MAGIC + i] !== USTAR_MAGIC[i]) return false
  }
  return true
}

/**
 * Normalizes an archive path to the tree's form. Returns '' for the archive
 * root ('.', './'), which the tree does not list.
 */
function normalizePath(raw: string, header: number): string {
  const parts: string[] = []
  for (const part of raw.split('/')) {
    if (part === '' || part === '.') continue
    // A data directory never needs '..'; refusing it keeps loads inside the root.
    if (part === '..') throw new TarError(`tar: '..' in path ${JSON.stringify(raw)} at offset ${header}`)
    parts.push(part)
  }
  return parts.join('/')
}

interface PaxOverrides {
  path?: string
  size?: number
  mtimeMs?: number
}

/** Parses pax extended header records ("<len> <key>=<value>\n"). */
function parsePax(data: Uint8Array, header: number): PaxOverrides {
  const out: PaxOverrides = {}
  let pos = 0
  while (pos < data.length) {
    // Some writers pad the record area with NULs.
    if (data[pos] === 0) break
    let len = 0
    let i = pos
    while (i < data.length && data[i]! >= 0x30 && data[i]! <= 0x39) len = len * 10 + (data[i++]! - 0x30)
    const end = pos + len
    if (i === pos || data[i] !== SPACE || end > data.length || data[end - 1] !== 0x0a) {
      throw new TarError(`tar: malformed pax record in header at offset ${header}`)
    }
    const record = data.subarray(i + 1, end - 1)
    const eq = record.indexOf(0x3d)
    if (eq < 0) throw new TarError(`tar: malformed pax record in header at offset ${header}`)
    const key = decoder.decode(record.subarray(0, eq))
    const value = decoder.decode(record.subarray(eq + 1))
    if (key === 'path') {
      out.path = value
    } else if (key === 'size') {
      if (!/^\d+$/.test(value)) throw new TarError(`tar: bad pax size in header at offset ${header}`)
      out.size = Number(value)
    } else if (key === 'mtime') {
      const secs = Number(value)
      if (Number.isFinite(secs)) out.mtimeMs = Math.floor(secs * 1000)
    }
    pos = end
  }
  return out
}

/** Reads a ustar (or GNU / pax) archive; file data are views of `bytes`. */
export function unpackTar(bytes: Uint8Array): TreeEntry[] {
  const out: TreeEntry[] = []
  // Path -> index in `out`, to place parents and let later duplicates win.
  const index = new Map<string, number>()
  let pax: PaxOverrides | undefined
  let longName: string | undefined
  let off = 0

  for (;;) {
    if (off + BLOCK > bytes.length) {
      throw new TarError(`tar: archive truncated at offset ${off} (no end-of-archive marker)`)
    }
    let raw = 0
    for (let i = off; i < off + BLOCK; i++) raw += bytes[i]!
    if (raw === 0) break

    let fieldSum = 0
    let fieldSigned = 0
    for (let i = off + CHKSUM; i < off + CHKSUM + 8; i++) {
      fieldSum += bytes[i]!
      fieldSigned += (bytes[i]! << 24) >> 24
    }
    const stored = readNumber(bytes, off + CHKSUM, 8, 'checksum', off)
    if (stored !== raw - fieldSum + 8 * SPACE && stored !== signedSum(bytes, off) - fieldSigned + 8 * SPACE) {
      throw new TarError(`tar: bad header checksum at offset ${off}`)
    }

    const type = bytes[off + TYPEFLAG]!
    const header = off
    let size = readNumber(bytes, off + SIZE, 12, 'size', header)
    if (pax?.size !== undefined && (type === 0x30 || type === 0 || type === 0x37)) size = pax.size
    const dataStart = off + BLOCK
    const dataEnd = dataStart + size
    if (dataEnd > bytes.length) {
      throw new TarError(`tar: archive truncated: entry at offset ${header} needs ${size} data bytes`)
    }
    const data = bytes.subarray(dataStart, dataEnd)
    off = dataStart + padded(size)

    if (type === 0x78 /* x */) {
      pax = parsePax(data, header)
      continue
    }
    if (type === 0x67 /* g */ || type === 0x4b /* K */) continue
    if (type === 0x4c /* L */) {
      longName = decoder.decode(cString(data, 0, data.length))
      continue
    }

    let name: string
    if (pax?.path !== undefined) name = pax.path
    else if (longName !== undefined) name = longName
    else {
      const base = decoder.decode(cString(bytes, header + NAME, NAME_LEN))
      const prefix = hasUstarMagic(bytes, header) ? decoder.decode(cString(bytes, header + PREFIX, PREFIX_LEN)) : ''
      name = prefix ? `${prefix}/${base}` : base
    }
    const mtimeMs = pax?.mtimeMs ?? readNumber(bytes, header + MTIME, 12, 'mtime', header) * 1000
    const perm = readNumber(bytes, header + MODE, 8, 'mode', header) & 0o7777
    pax = undefined
    longName = undefined

    let isDir: boolean
    if (type === 0x35 /* 5 */ || type === 0x44 /* GNU dumpdir D */) isDir = true
    else if (type === 0x30 || type === 0 || type === 0x37) isDir = name.endsWith('/') // pre-POSIX dirs
    else continue // links, devices, fifos, sparse files, volume labels

    const path = normalizePath(name, header)
    if (path === '') continue
    const entry: TreeEntry = isDir
      ? { path, mode: S_IFDIR | perm, mtimeMs }
      : { path, mode: S_IFREG | perm, mtimeMs, data }
    addEntry(out, index, entry, header)
  }
  return out
}

function signedSum(buf: Uint8Array, at: number): number {
  let s = 0
  for (let i = at; i < at + BLOCK; i++) s += (buf[i]! << 24) >> 24
  return s
}

function addEntry(out: TreeEntry[], index: Map<string, number>, entry: TreeEntry, header: number): void {
  const existing = index.get(entry.path)
  if (existing !== undefined) {
    // An explicit entry replaces a synthesized parent or an earlier copy in place,
    // which keeps parents ahead of their contents.
    out[existing] = entry
    return
  }
  // Find the missing ancestors, deepest first, stopping at the first present one
  // (its own ancestors were ensured when it was added).
  const missing: string[] = []
  let slash = entry.path.lastIndexOf('/')
  while (slash > 0) {
    const parent = entry.path.slice(0, slash)
    const at = index.get(parent)
    if (at !== undefined) {
      if ((out[at]!.mode & S_IFMT) !== S_IFDIR) {
        throw new TarError(`tar: ${entry.path} (offset ${header}) is inside non-directory ${parent}`)
      }
      break
    }
    missing.push(parent)
    slash = parent.lastIndexOf('/')
  }
  for (let i = missing.length - 1; i >= 0; i--) {
    index.set(missing[i]!, out.length)
    out.push({ path: missing[i]!, mode: SYNTH_DIR_MODE, mtimeMs: 0 })
  }
  index.set(entry.path, out.length)
  out.push(entry)
}

/** True when `bytes` start with the gzip magic number. */
export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b
}
