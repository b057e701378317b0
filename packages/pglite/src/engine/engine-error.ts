/** The error the engine raises (re-exported by `errors.ts` with the other error classes). */

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
