/**
 * Which buffers a message can transfer rather than copy. Structured clone
 * copies a view's whole underlying buffer, and transferring detaches it for
 * every holder, so only buffers that belong to the message alone qualify.
 */
import type { PGlite } from '../pglite.js'
import type { Results } from '../query/results.js'
import { OID, defaultParsers } from '../types/index.js'

/** Whether `bytes` spans its whole, non-shared buffer. */
export function ownsBuffer(bytes: Uint8Array): bytes is Uint8Array<ArrayBuffer> {
  return bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
}

/**
 * Adds the buffers of a result's `bytea` values to `transfer`. Only while the
 * instance uses the default `bytea` parser: it makes a fresh buffer per value,
 * so nothing else in the worker can be holding one.
 */
export function byteaBuffers(db: PGlite, result: Results, arrayRows: boolean, transfer: ArrayBuffer[] | undefined): ArrayBuffer[] | undefined {
  const fields = result.fields
  for (let f = 0; f < fields.length; f++) {
    const field = fields[f]!
    if (field.dataTypeID !== OID.BYTEA) continue
    if (db.parsers[OID.BYTEA] !== defaultParsers[OID.BYTEA]) return transfer
    // Object rows keep one value per name: a repeated name would list its buffer twice, which postMessage refuses.
    if (!arrayRows && fields.findIndex((other) => other.name === field.name) !== f) continue
    const key: string | number = arrayRows ? f : field.name
    const rows = result.rows as Record<string | number, unknown>[]
    for (let r = 0; r < rows.length; r++) {
      const value = rows[r]![key]
      if (value instanceof Uint8Array && ownsBuffer(value)) (transfer ??= []).push(value.buffer)
    }
  }
  return transfer
}
