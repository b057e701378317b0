import type { BackendMessage } from './protocol/message-sink.js'
import type { Notice } from './query/results.js'

/** Options of `execProtocol`, `execProtocolStream`, `execProtocolRaw`. */
export interface ExecProtocolOptions {
  /** Throw the first ErrorResponse as a {@link DatabaseError} (default true; `execProtocol` only). */
  throwOnError?: boolean
  onNotice?: (notice: Notice) => void
  /** Accepted for PGlite compatibility; on-disk writes in Node are synchronous. */
  syncToFs?: boolean
}

export interface ExecProtocolStreamOptions {
  /** Receives backend bytes as the engine writes them; the view is valid only during the call. */
  onRawData: (data: Uint8Array) => void
  syncToFs?: boolean
}

export interface ExecProtocolResult {
  messages: BackendMessage[]
  data: Uint8Array
}
