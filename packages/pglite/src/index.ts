export { PGlite } from './pglite.js'
export type {
  ExecProtocolOptions,
  ExecProtocolResult,
  ExecProtocolStreamOptions,
  Transaction,
  EngineLease,
  LeaseClient,
} from './pglite.js'
export type { PGliteExtension, PGliteExtensionSetup, PGliteOptions } from './options.js'
export type { PGliteInterface } from './interface.js'
export type { SessionTimeouts } from './engine/backend/backend-types.js'
export type { TransactionBlock } from './engine/backend/transaction-block.js'
export type { UtilityStatement, UtilityRefusal } from './engine/hooks/utility-hook.js'
export type { ActivityRow } from './engine/hooks/activity-report.js'
export type { DumpCompression, DataDirArchive } from './fs/dump.js'
export type { ContribExtension } from './extensions/contrib.js'
export type { Results, QueryOptions, DescribeQueryResult, Field, RowMode, Notice } from './query/results.js'
export type { TransactionOptions } from './query/abort.js'
export { DatabaseError, ProtocolError, EngineError, ClosedError, DataDirLockedError, IncompatibleDataDirError } from './errors.js'
export type { ServerFields, ProtocolErrorCode, EngineErrorCode } from './errors.js'
export { sql, raw, identifier, query } from './query/template.js'
export { quoteIdent } from './quote-ident.js'
export type { SqlFragment, SqlText, TemplatedQuery } from './query/template.js'
export { OID, defaultParsers as parsers, defaultSerializers as serializers } from './types/index.js'
export type { Parser, Serializer } from './types/index.js'
export type { BackendMessage } from './protocol/message-sink.js'
/** The longest frame a frontend message of each type may have (Postgres' limits); for servers that forward client bytes. */
export { maxFrontendMessageBytes } from './engine/wire/frontend-frames.js'
/** Runs V8's full collection on a later turn (Node; a no-op elsewhere), for servers that just let go of much memory: an idle process would keep it for a while. */
export { collectGarbageSoon } from './engine/backend/collect-garbage.js'
// The rest of `@electric-sql/pglite`'s root exports, same names and shapes.
export * as types from './types-export.js'
export type { TypeHandler } from './types-export.js'
export { formatQuery } from './format-query.js'
export type { FormatQueryTarget } from './format-query.js'
export * as parse from './parse-results.js'
export * as protocol from './protocol-compat/index.js'
export * as messages from './protocol-compat/messages.js'
export { Mutex } from './mutex.js'
export type { MutexReleaser } from './mutex.js'
export { MemoryFS } from './fs-compat/memory.js'
export { IdbFs } from './fs-compat/idb.js'
export type { Filesystem } from './fs-compat/filesystem.js'
export { TransactionAbortedError } from './transaction-aborted-error.js'
// Not in ./contrib: that module holds one export per bundle, as PGlite's does.
export { onUse } from './extensions/on-use.js'
