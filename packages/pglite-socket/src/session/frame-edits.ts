import { Frontend } from '@pgwasm/pglite/protocol'
import { mayNeedInspection } from '../sql/listen.js'
import { splitIfCopyFromClient } from '../sql/copy-from-client.js'
import { concat, cstrings, forEachFrame, frame, readInt32, decodeUtf8 } from '../wire/wire.js'

/** The frame at `bytes[at, at + size)` with its SQL, `bytes[sqlStart, sqlEnd)`, replaced by `sql`. */
export function withSql(bytes: Uint8Array, at: number, size: number, sqlStart: number, sqlEnd: number, sql: string): Uint8Array {
  const text = new TextEncoder().encode(sql)
  const out = new Uint8Array(size - (sqlEnd - sqlStart) + text.length)
  out.set(bytes.subarray(at, sqlStart), 0)
  out.set(text, sqlStart - at)
  out.set(bytes.subarray(sqlEnd, at + size), sqlStart - at + text.length)
  new DataView(out.buffer).setInt32(1, out.length - 1)
  return out
}

/** Whether `batch` is exactly one request: one Query, or extended messages ending in their one Sync. */
export function isOneRequest(batch: Uint8Array): boolean {
  let ends = 0
  let last = 0
  forEachFrame(batch, (type) => {
    if (type === Frontend.Query || type === Frontend.Sync) ends++
    last = type
  })
  return ends === 1 && (last === Frontend.Query || last === Frontend.Sync)
}

const SYNC = new Uint8Array([0x53 /* S */, 0, 0, 0, 4])

/** Close of a prepared statement, then Sync. */
export function closeStatement(name: string): Uint8Array {
  return concat([frame(Frontend.Close, concat([new Uint8Array([0x53 /* S */]), cstrings(name)])), SYNC])
}

/** The Bind or Describe frame at `buffer[at]` with the unnamed statement replaced by `name`. */
export function aliasFrame(buffer: Uint8Array, at: number, size: number, name: Uint8Array): Uint8Array {
  // The statement's name is empty: its NUL is the first one after the portal name (Bind) or kind byte (Describe).
  const nameAt = buffer[at] === Frontend.Bind ? nulAfter(buffer, at + 5, at + size) + 1 : at + 6
  const out = Buffer.allocUnsafe(size + name.length)
  out.set(buffer.subarray(at, nameAt), 0)
  out.set(name, nameAt - at)
  out.set(buffer.subarray(nameAt, at + size), nameAt - at + name.length)
  out.writeInt32BE(size + name.length - 1, 1)
  return out
}

/** Offset of the first NUL in `buffer[from, end)`, or `end`. */
export function nulAfter(buffer: Uint8Array, from: number, end: number): number {
  const at = buffer.indexOf(0, from)
  return at < 0 || at > end ? end : at
}

/** Whether the bytes at `at` are a Terminate message (`X`, length 4). */
export function isTerminate(bytes: Uint8Array, at: number, available: number): boolean {
  return available >= 5 && bytes[at] === Frontend.Terminate && readInt32(bytes, at + 1) === 4
}

/** Whether the Parse frame at `bytes[at, end)` is of the unnamed statement and holds a COPY FROM STDIN. */
export function parsesCopyFromClient(bytes: Uint8Array, at: number, end: number): boolean {
  if (bytes[at + 5] !== 0) return false
  const sqlStart = at + 6
  const sqlEnd = nulAfter(bytes, sqlStart, end)
  if (!mayNeedInspection(bytes, sqlStart, sqlEnd)) return false
  return splitIfCopyFromClient(decodeUtf8(bytes.subarray(sqlStart, sqlEnd))) !== undefined
}
