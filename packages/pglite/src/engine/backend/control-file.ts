import type { DataTree } from '../files/pgdata-tree.js'

const CONTROL_PATH = 'global/pg_control'
/** ControlFileData's fields after `data_checksum_version`: `default_char_signedness` (bool), the 32-byte mock authentication nonce, then the CRC at a 4-byte boundary. */
const CHECKSUM_VERSION_BEFORE_CRC = 40
/** Where the CRC is looked for: the struct is ~300 bytes (the file is padded to 8 kB with zeros). */
const MAX_CRC_OFFSET = 1024

/**
 * The template with data checksums off, for a database that lives in
 * memory: a page there cannot rot as a page on a disk can, and computing
 * the checksum of every page written cost ~0.5 s per GB loaded (7% of a 1 GB
 * COPY). Only pg_control's `data_checksum_version` changes, which is all
 * `pg_checksums --disable` does; pages keep the checksums they had. The CRC
 * is found where it matches, and the field checked, so a layout other than
 * the one this was written against leaves the tree as it is.
 */
export function withoutDataChecksums(tree: DataTree): DataTree {
  const at = tree.findIndex((entry) => entry.path === CONTROL_PATH)
  const data = at < 0 ? undefined : tree[at]!.data
  if (!data) return tree
  const crcAt = crcOffset(data)
  if (crcAt === undefined) return tree
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  const versionAt = crcAt - CHECKSUM_VERSION_BEFORE_CRC
  if (view.getUint32(versionAt, true) !== 1) return tree
  // A copy: `data` may be a Buffer, whose slice() is a view of the bytes it shares with every other file of the template.
  const patched = new Uint8Array(data.byteLength)
  patched.set(data)
  const out = new DataView(patched.buffer)
  out.setUint32(versionAt, 0, true)
  out.setUint32(crcAt, crc32c(patched.subarray(0, crcAt)), true)
  const copy = tree.slice()
  copy[at] = { ...tree[at]!, data: patched }
  return copy
}

/** Where the stored CRC of the bytes before it is: the CRC is run once over the file, checked at each 4-byte boundary. */
function crcOffset(data: Uint8Array): number | undefined {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  const crc = crcTable()
  let c = 0xffffffff
  const end = Math.min(data.length, MAX_CRC_OFFSET) - 4
  for (let at = 0; at <= end; at++) {
    if (at % 4 === 0 && at >= CHECKSUM_VERSION_BEFORE_CRC && ((c ^ 0xffffffff) >>> 0) === view.getUint32(at, true)) return at
    c = crc[(c ^ data[at]!) & 0xff]! ^ (c >>> 8)
  }
  return undefined
}

let table: Uint32Array | undefined

function crcTable(): Uint32Array {
  if (table) return table
  table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
}

/** CRC-32C (Castagnoli), Postgres' `pg_crc32c`. */
export function crc32c(bytes: Uint8Array): number {
  const crc = crcTable()
  let c = 0xffffffff
  for (let i = 0; i < bytes.length; i++) c = crc[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8)
  return (c ^ 0xffffffff) >>> 0
}
