/**
 * The messages between `PGliteWorker` (the page) and `worker()` (the
 * worker). One request and one reply per call; values go by structured
 * clone, never JSON, so `Date`, `bigint`, `Uint8Array` and `Blob` arrive as
 * themselves.
 */
import type { DumpCompression } from '../fs/dump.js'
import type { Notice, Results } from '../query/results.js'
import type { WireError } from './error-codec.js'
import type { PGliteWorkerInitOptions, WireQueryOptions } from './options.js'

/** `tx` of a request that runs outside any transaction. */
export const NO_TRANSACTION = 0

/** Page to worker. `tx` names a transaction opened by `begin`, or is {@link NO_TRANSACTION}. */
export type Request =
  | { readonly op: 'init'; readonly id: number; readonly options: PGliteWorkerInitOptions }
  | {
      readonly op: 'query'
      readonly id: number
      readonly tx: number
      readonly sql: string
      readonly params: readonly unknown[] | undefined
      readonly options: WireQueryOptions | undefined
    }
  | { readonly op: 'exec'; readonly id: number; readonly tx: number; readonly sql: string; readonly options: WireQueryOptions | undefined }
  | { readonly op: 'describeQuery'; readonly id: number; readonly sql: string; readonly paramTypes: number[] | undefined }
  | { readonly op: 'begin'; readonly id: number }
  /** Ends the transaction: commit (unless it was rolled back already) or roll back. */
  | { readonly op: 'end'; readonly id: number; readonly tx: number; readonly commit: boolean }
  | { readonly op: 'rollback'; readonly id: number; readonly tx: number }
  | { readonly op: 'listen'; readonly id: number; readonly tx: number; readonly channel: string }
  | { readonly op: 'unlisten'; readonly id: number; readonly tx: number; readonly channel: string }
  | { readonly op: 'execProtocolRaw'; readonly id: number; readonly message: Uint8Array }
  | { readonly op: 'dumpDataDir'; readonly id: number; readonly compression: DumpCompression | undefined }
  | { readonly op: 'close'; readonly id: number }

export type Op = Request['op']

/** `describeQuery`'s answer without the parser and serializer functions, which cannot cross. */
export interface WireDescription {
  queryParams: { dataTypeID: number }[]
  resultFields: { name: string; dataTypeID: number }[]
}

/** A `dumpDataDir` file as bytes: a `File` arrives as a nameless `Blob` in Node's structured clone. */
export interface WireDump {
  bytes: Uint8Array
  name: string | undefined
  type: string
}

/** What a successful reply to each request carries. */
export interface OpValues {
  init: undefined
  query: Results
  exec: Results[]
  describeQuery: WireDescription
  begin: number
  end: undefined
  rollback: undefined
  listen: undefined
  unlisten: undefined
  execProtocolRaw: Uint8Array
  dumpDataDir: WireDump
  close: undefined
}

/** Worker to page. */
export type Reply =
  | { readonly kind: 'ok'; readonly id: number; readonly value: OpValues[Op]; readonly notices?: Notice[] }
  | { readonly kind: 'error'; readonly id: number; readonly error: WireError; readonly notices?: Notice[] }
  | { readonly kind: 'notification'; readonly channel: string; readonly payload: string }
  /**
   * Sent once when the worker starts listening. A page whose `init` went out
   * before that (and could be lost, e.g. behind a worker's top-level await)
   * sends it again.
   */
  | { readonly kind: 'hello' }
  /**
   * Whether this page's worker leads the tabs that share its database
   * (tabs.ts): sent before the `init` reply (`moved` false), and with
   * `moved` true each time a tab (this one or another) starts leading, so
   * the database runs in a new session.
   */
  | { readonly kind: 'leader'; readonly isLeader: boolean; readonly moved: boolean }
