/**
 * The PostgreSQL wire protocol's message type bytes and the ReadyForQuery
 * status byte, as `@pgwasm/pglite/protocol`: one definition that the core's
 * client side and `@pgwasm/pglite-socket`'s server side both read.
 *
 * @example
 * ```ts
 * const reply = await db.execProtocolRaw(message)
 * const ready = reply.subarray(reply.length - 6) // the last message
 * const inBlock = ready[0] === Backend.ReadyForQuery && ready[5] === TxStatus.InBlock
 * ```
 */
export { Backend, FRONTEND_TYPES, Frontend, TxStatus } from './engine/wire/message-codes.js'
