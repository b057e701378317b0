/**
 * Which frontend frames the backend takes: the lengths Postgres accepts of
 * each message type, and the COPY data the engine feeds it in the middle of
 * a request. Anything else would end the backend every caller shares
 * (protocol/frames.ts checks a caller's whole request before it runs).
 */
import { Frontend } from './message-codes.js'

/** A frame's type byte and its length field. */
export const FRAME_HEADER_BYTES = 5

/** The unsigned big-endian 32-bit integer at `at`: a frame's length field, a startup packet's length and code. */
export function uint32At(buf: Uint8Array, at: number): number {
  return ((buf[at]! << 24) | (buf[at + 1]! << 16) | (buf[at + 2]! << 8) | buf[at + 3]!) >>> 0
}

/**
 * The longest frame (length field) Postgres accepts for a frontend message
 * type; over it the backend exits (PQ_SMALL/LARGE_MESSAGE_LIMIT in
 * postgres.c, SocketBackend). Bind, CopyData, FunctionCall, Parse and Query
 * may be large; every other message must stay small.
 */
export function maxFrontendMessageBytes(type: number): number {
  switch (type) {
    case 0x42 /* B */:
    case 0x64 /* d */:
    case 0x46 /* F */:
    case 0x50 /* P */:
    case 0x51 /* Q */:
      return 0x3fffffff
    default:
      return 10000
  }
}

/**
 * Checks COPY data handed to a COPY in the middle of its request: whole
 * CopyData frames, of lengths Postgres accepts, and nothing else but one
 * CopyDone or CopyFail at the very end.
 * @returns 'ends' when it ends with that CopyDone or CopyFail, 'more' when it does not, undefined when it is not COPY data (or empty).
 */
export function copyInData(bytes: Uint8Array): 'ends' | 'more' | undefined {
  let at = 0
  while (at < bytes.length) {
    if (bytes.length - at < FRAME_HEADER_BYTES) return undefined
    const type = bytes[at]!
    const length = uint32At(bytes, at + 1)
    if (length < 4 || length > maxFrontendMessageBytes(type) || at + 1 + length > bytes.length) return undefined
    at += 1 + length
    if (type === Frontend.CopyDone || type === Frontend.CopyFail) return at === bytes.length ? 'ends' : undefined
    if (type !== Frontend.CopyData) return undefined
  }
  return at > 0 ? 'more' : undefined
}
