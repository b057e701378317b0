/**
 * The longest message (its length field) Postgres accepts per frontend
 * message type: PQ_LARGE_MESSAGE_LIMIT for Bind, CopyData, FunctionCall,
 * Parse and Query, PQ_SMALL_MESSAGE_LIMIT for every other (postgres.c,
 * SocketBackend; copyfromparse.c, CopyGetData). The engine refuses a request
 * holding a longer one, so the server checks before it buffers the body.
 *
 * Keep in sync with `maxFrontendMessageBytes` in
 * packages/pglite/src/protocol/frames.ts, which `@pgwasm/pglite` does not
 * export.
 */
export const LARGE_MESSAGE_BYTES = 0x3fffffff
export const SMALL_MESSAGE_BYTES = 10000

export function maxFrontendMessageBytes(type: number): number {
  switch (type) {
    case 0x42 /* B */:
    case 0x64 /* d */:
    case 0x46 /* F */:
    case 0x50 /* P */:
    case 0x51 /* Q */:
      return LARGE_MESSAGE_BYTES
    default:
      return SMALL_MESSAGE_BYTES
  }
}
