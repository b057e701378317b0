import { Parser as WireParser } from 'pg-protocol/dist/parser.js'
import type { BackendMessage } from 'pg-protocol/dist/messages.js'

/** Bytes `Parser.parse` takes: any buffer or view of one. */
export type BufferParameter = ArrayBuffer | ArrayBufferView

/** Called once per complete backend message. */
export type MessageCallback = (message: BackendMessage) => void

/**
 * Incremental backend-message parser, as PGlite's `protocol.Parser`: feed it
 * chunks of any size; a message split across chunks is delivered once it
 * is complete. pg-protocol's parser underneath wants a Node `Buffer`; this
 * one takes any `ArrayBuffer` or view (copied).
 */
export class Parser {
  readonly #inner = new WireParser()

  parse(buffer: BufferParameter, callback: MessageCallback): void {
    const view = buffer instanceof ArrayBuffer ? new Uint8Array(buffer) : new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
    // Copied: pg-protocol keeps views of a partial message and of decoded
    // fields, while the caller may reuse its buffer (an engine heap view).
    this.#inner.parse(Buffer.from(view), callback)
  }
}
