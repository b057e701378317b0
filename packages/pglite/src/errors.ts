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

/** Codes of {@link EngineError}. */
export type EngineErrorCode =
  | 'ENGINE_ABORT'
  | 'ENGINE_EXIT'
  | 'STARTUP_FAILED'
  | 'INITDB_FAILED'
  | 'ASSET_MISSING'
  | 'DATA_DIR_IN_USE'
  | 'BAD_DATA_DIR'
  /** A browser data directory (`idb://`) could not be written; the instance stays open, the write may be lost. */
  | 'PERSIST_FAILED'
  /** `lockSessionUser` was given a role that is missing, a superuser, or refused by Postgres; nothing changed. */
  | 'BAD_ROLE'
  /**
   * A `PGliteWorker` call went to another tab's worker, which went away
   * before answering: the call may or may not have taken effect. Another
   * tab leads now; retrying is safe where the call is.
   */
  | 'LEADER_CHANGED'

/**
 * The WASM engine trapped, exited or failed to start; `cause` holds the
 * low-level error. After an `ENGINE_ABORT` or `ENGINE_EXIT` an in-memory
 * instance is closed. A directory or `idb://` database starts the engine
 * again on what it stored (Postgres' crash recovery replays the WAL), and
 * the instance stays open: see {@link EngineError.reopened}.
 */
export class EngineError extends Error {
  override name = 'EngineError'
  readonly code: EngineErrorCode
  /** Postgres' last log lines, when there are any. */
  readonly log?: string
  /**
   * `ENGINE_ABORT` / `ENGINE_EXIT` of a directory or `idb://` database:
   * `true` when the engine was started again on what it stored and the
   * instance stays open.
   * Every committed transaction is kept; the call that met the failure, the
   * transaction it was in, and the session's state (settings, prepared
   * statements, temporary tables, cursors, advisory locks) are gone.
   * `false` when the new start failed too (the instance is closed).
   */
  readonly reopened?: boolean
  constructor(message: string, options: { code: EngineErrorCode; cause?: unknown; log?: string; reopened?: boolean }) {
    super(message, { cause: options.cause })
    this.code = options.code
    this.log = options.log
    if (options.reopened !== undefined) this.reopened = options.reopened
  }
}

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
