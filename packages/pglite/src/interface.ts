// Types only: the option types name the instance through this, not through
// the PGlite class, which imports them (an add-on's `setup` gets the instance).
import type { ExecProtocolOptions, ExecProtocolResult, ExecProtocolStreamOptions } from './exec-protocol-types.js'
import type { DumpCompression } from './fs/dump.js'
import type { EngineLease } from './lease-types.js'
import type { ChannelListener, NotificationListener } from './notify.js'
import type { BackendMessage } from './protocol/message-sink.js'
import type { TransactionOptions } from './query/abort.js'
import type { DescribeQueryResult, QueryOptions, Results } from './query/results.js'
import type { Transaction } from './transaction-types.js'
import type { Parser, Serializer } from './types/index.js'

/**
 * A `PGlite` instance: the public members of the {@link PGlite} class,
 * which implements this (each is documented there). As
 * `@electric-sql/pglite`'s `PGliteInterface`, it is what an add-on's
 * `setup` receives.
 */
export interface PGliteInterface extends AsyncDisposable {
  readonly waitReady: Promise<void>
  readonly dataDir: string | undefined
  readonly debug: number
  readonly parsers: Record<number, Parser>
  readonly serializers: Record<number, Serializer>
  readonly ready: boolean
  readonly closed: boolean
  readonly Module: { readonly HEAPU8: Uint8Array }
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<Results<T>>
  sql<T = Record<string, unknown>>(strings: TemplateStringsArray, ...params: unknown[]): Promise<Results<T>>
  exec(sql: string, options?: QueryOptions): Promise<Results[]>
  describeQuery(sql: string, options?: QueryOptions): Promise<DescribeQueryResult>
  transaction<T>(callback: (tx: Transaction) => Promise<T>, options?: TransactionOptions): Promise<T>
  listen(channel: string, callback: ChannelListener, tx?: Transaction): Promise<(tx?: Transaction) => Promise<void>>
  unlisten(channel: string, callback?: ChannelListener, tx?: Transaction): Promise<void>
  onNotification(callback: NotificationListener): () => void
  offNotification(callback: NotificationListener): void
  execProtocol(message: Uint8Array, options?: ExecProtocolOptions): Promise<ExecProtocolResult>
  execProtocolStream(message: Uint8Array, options?: ExecProtocolOptions): Promise<BackendMessage[]>
  execProtocolRaw(message: Uint8Array, options?: ExecProtocolOptions): Promise<Uint8Array>
  execProtocolRawStream(message: Uint8Array, options: ExecProtocolStreamOptions): Promise<void>
  lease(): Promise<EngineLease>
  runExclusive<T>(fn: () => Promise<T>): Promise<T>
  refreshArrayTypes(): Promise<void>
  lockSessionUser(role: string): Promise<void>
  clone(): Promise<PGliteInterface>
  copyToFS(path: string, data: Uint8Array, mode?: number): Promise<void>
  dumpDataDir(compression?: DumpCompression): Promise<File | Blob>
  dumpSql(): Promise<string>
  isInTransaction(): boolean
  close(): Promise<void>
}
