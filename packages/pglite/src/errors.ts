/**
 * The error classes of pgwasm. Each has a stable `code`; branch on
 * `instanceof` or `code`, never on the message text.
 */

/** Fields of a PostgreSQL ErrorResponse or NoticeResponse. */
export interface ServerFields {
  severity?: string
  code?: string
  detail?: string
  hint?: string
  position?: string
  internalPosition?: string
  internalQuery?: string
  where?: string
  schema?: string
  table?: string
  column?: string
  dataType?: string
  constraint?: string
  file?: string
  line?: string
  routine?: string
}

/**
 * An error reported by PostgreSQL (an ErrorResponse). `code` is the SQLSTATE,
 * e.g. `23505` for a unique violation; the other fields are the server's.
 */
export class DatabaseError extends Error implements ServerFields {
  override name = 'DatabaseError'
  /** The SQLSTATE code, e.g. `42P01`. */
  code: string
  severity?: string
  detail?: string
  hint?: string
  position?: string
  internalPosition?: string
  internalQuery?: string
  where?: string
  schema?: string
  table?: string
  column?: string
  dataType?: string
  constraint?: string
  file?: string
  line?: string
  routine?: string
  /** The message length on the wire, as pg-protocol reports it. */
  length: number
  /** The SQL text of the statement that failed, when known. */
  query?: string
  /** The parameters of the statement that failed, when known. */
  params?: readonly unknown[]

  constructor(message: string, fields: ServerFields, length = 0) {
    super(message)
    Object.assign(this, fields)
    this.code = fields.code ?? 'XX000'
    this.length = length
  }
}

/** Codes of {@link ProtocolError}. */
export type ProtocolErrorCode = 'BAD_FRAME' | 'UNKNOWN_MESSAGE' | 'UNEXPECTED_MESSAGE' | 'BAD_PARAMETER'

/** Malformed or unsupported protocol input (a frame the engine must not see). */
export class ProtocolError extends Error {
  override name = 'ProtocolError'
  readonly code: ProtocolErrorCode
  constructor(message: string, options: { code: ProtocolErrorCode; cause?: unknown }) {
    super(message, { cause: options.cause })
    this.code = options.code
  }
}

export { EngineError, type EngineErrorCode } from './engine/engine-error.js'

/** The instance was closed (or is closing) when the call was made. */
export class ClosedError extends Error {
  override name = 'ClosedError'
  readonly code = 'CLOSED' as const
  constructor(message = 'PGlite is closed') {
    super(message)
  }
}

/** Another instance (in this or another process) has the data directory open. */
export class DataDirLockedError extends Error {
  override name = 'DataDirLockedError'
  readonly code = 'DATA_DIR_LOCKED' as const
  readonly path: string
  /** Who holds it, e.g. `this process` or `pid 1234 on host`. */
  readonly holder: string
  constructor(message: string, options: { path: string; holder: string }) {
    super(message)
    this.path = options.path
    this.holder = options.holder
  }
}

/** The data directory was made by another PostgreSQL major version than the engine's. */
export class IncompatibleDataDirError extends Error {
  override name = 'IncompatibleDataDirError'
  readonly code = 'INCOMPATIBLE_DATA_DIR' as const
  readonly path: string
  /** PG_VERSION of the directory. */
  readonly dataDirVersion: string
  /** Major version of the engine. */
  readonly engineVersion: string
  constructor(message: string, options: { path: string; dataDirVersion: string; engineVersion: string }) {
    super(message)
    this.path = options.path
    this.dataDirVersion = options.dataDirVersion
    this.engineVersion = options.engineVersion
  }
}
