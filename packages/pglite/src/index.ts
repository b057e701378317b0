export { PGlite } from './pglite.js'
export type {
  ExecProtocolOptions,
  ExecProtocolResult,
  ExecProtocolStreamOptions,
  Transaction,
  EngineLease,
} from './pglite.js'
export type { PGliteOptions } from './options.js'
export type { DumpCompression, DataDirArchive } from './fs/dump.js'
export type { ContribExtension } from './extensions/contrib.js'
export type { Results, QueryOptions, DescribeQueryResult, Field, RowMode, Notice } from './query/results.js'
export { DatabaseError, ProtocolError, EngineError, ClosedError, DataDirLockedError, IncompatibleDataDirError } from './errors.js'
export type { ServerFields, ProtocolErrorCode, EngineErrorCode } from './errors.js'
export { sql, raw, identifier, query } from './query/template.js'
export type { SqlFragment, SqlText, TemplatedQuery } from './query/template.js'
export { OID, defaultParsers as parsers, defaultSerializers as serializers } from './types/index.js'
export type { Parser, Serializer } from './types/index.js'
export type { BackendMessage } from './protocol/message-sink.js'
/** The longest frame a frontend message of each type may have (Postgres' limits); for servers that forward client bytes. */
export { maxFrontendMessageBytes } from './protocol/frames.js'
