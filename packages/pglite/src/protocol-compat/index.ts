/**
 * PGlite's `protocol` namespace: the wire-protocol `Parser` (backend
 * messages), `serialize` (frontend messages, as `Uint8Array`s) and the
 * message classes, for code that talks to `execProtocol`/`execProtocolRaw`.
 */
export { Parser } from './parser.js'
export type { BufferParameter, MessageCallback } from './parser.js'
export { serialize } from 'pg-protocol/dist/serializer.js'
import * as messages from './messages.js'
export { messages }
