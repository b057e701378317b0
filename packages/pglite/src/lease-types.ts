import type { ActivityRow } from './engine/hooks/activity-report.js'
import type { SessionTimeouts } from './engine/backend/backend-types.js'
import type { UtilityRefusal, UtilityStatement } from './engine/hooks/utility-hook.js'
import type { TransactionBlock } from './engine/backend/transaction-block.js'

/** Exclusive use of the engine, from {@link PGlite.lease}. */
export interface EngineLease {
  /**
   * Runs whole frontend frames (the caller checked them) and hands the
   * backend bytes to `onRawData`, synchronously. Throws {@link EngineError}
   * if the engine died.
   */
  execProtocolRawStream(message: Uint8Array, onRawData: (bytes: Uint8Array) => void): void
  /** Whether the backend session is inside a transaction block. */
  readonly inTransaction: boolean
  /**
   * The session's timeout settings as the engine holds them now, in ms (0:
   * off). The engine never acts on the session-ending ones itself (that
   * would end it for every caller): a server enforces them per client.
   */
  readonly sessionTimeouts: SessionTimeouts
  /** Channels this instance's own `listen()` callbacks need LISTENed on the backend. */
  readonly listeningChannels: readonly string[]
  /** Whether other calls wait for the instance (a holder of many turns should let them run). */
  readonly othersWaiting: boolean
  /**
   * How many times the instance had started its engine again after a
   * failure when this lease was taken (see {@link EngineError.reopened}): a
   * lease with a higher count than the last one runs on a new session, in
   * which nothing of the old one's state is left.
   */
  readonly restarts: number
  /**
   * Names the server client the following execs run for, until another is
   * named or the lease is released: `pg_backend_pid()` answers its `pid`,
   * and the session-level advisory locks it takes are its own (another
   * client's lock on the same key is refused with 55P03, see the socket
   * package's README). Undefined: an in-process caller.
   */
  runFor(client: LeaseClient | undefined): void
  /**
   * Cancels each later exec of this lease that runs longer than `ms`, with
   * 57014 "canceling statement due to user request", as a CancelRequest
   * would: where the statement calls out of the engine (clock reads, file
   * I/O; a PL/pgSQL loop runs on). `undefined`: no limit. Gone at release.
   */
  limitTime(ms: number | undefined): void
  /**
   * While a later exec of this lease runs, `check` is asked, where the
   * statement calls out of the engine, whether it is to stop: first 10 ms
   * into the exec, then every 10 ms. True cancels it with 57014 "canceling
   * statement due to user request", as a CancelRequest does (a PL/pgSQL loop
   * that calls out to nothing runs on). `check` must not call the instance.
   * `undefined`: never asked. Gone at release.
   */
  stopWhen(check: (() => boolean) | undefined): void
  /**
   * From now on, `beat` is called while any exec of this instance runs
   * (an in-process caller's too), where the statement calls out of the
   * engine: first 10 ms into it, then every 10 ms. A server tells its
   * helper process with it that this thread is busy. It must not call the
   * instance. `undefined`: none. Kept after release (not across a restart:
   * set it at each lease).
   */
  whileBusy(beat: (() => void) | undefined): void
  /**
   * While the lease is held, `callback` is called each time another caller
   * starts to wait for the engine ({@link othersWaiting} turns true then), in
   * that caller's own call: it must not use the lease before a later turn
   * (a microtask). A server lets go of the engine then if it can.
   * `undefined`: none. Ends with the lease.
   */
  whenOthersWait(callback: (() => void) | undefined): void
  /**
   * Where a later exec of this lease that runs `COPY ... FROM STDIN` gets
   * the rest of its data once it has read all of its message: `next` is
   * called (synchronously, inside the exec) for whole CopyData frames, the
   * last of them possibly the CopyDone or CopyFail that ends the data; it
   * may block until the data is there. What is not COPY data, or undefined,
   * fails the COPY (57014). `undefined`: the COPY fails when the message
   * runs out. Gone at release.
   */
  copyInFrom(next: (() => Uint8Array | undefined) | undefined): void
  /** Releases the session-level advisory locks of client `id` (it disconnected). */
  forgetClient(id: number): void
  /**
   * Ids of the clients named by {@link runFor} that `pg_terminate_backend()`
   * asked to end since the last call: the server ends their connections
   * (`pg_cancel_backend()` of such a client returns true and stops nothing:
   * no statement of it runs meanwhile).
   */
  takeTerminations(): number[]
  /**
   * How many session-level advisory locks were let go of so far: a count
   * that only grows, so a server can tell when a lock it was refused may be
   * free to take.
   */
  readonly advisoryReleases: number
  /**
   * How many calls and statements so far, in any SQL (a function's, dynamic
   * SQL), took something that lasts until the transaction ends and that
   * {@link transactionBlock} does not show: a transaction-level advisory
   * lock, a notification (`pg_notify()`, `NOTIFY`), `LOCK TABLE`, a
   * large-object descriptor (`lo_open()`), an exported snapshot. A count
   * that only grows: a server compares it with the count when its client's
   * block began.
   */
  readonly blockBoundCalls: number
  /**
   * The open transaction block's isolation level, access mode, whether it
   * has a transaction id and how many savepoints it holds, read from the
   * engine's memory between requests (no statement runs); undefined
   * outside a block. A server asks it to tell whether a client's block
   * could end and begin again unnoticed.
   */
  transactionBlock(): TransactionBlock | undefined
  /**
   * The pids (as {@link runFor} named their clients; 0: an in-process
   * caller) that hold the session-level advisory lock `key`, as the 55P03
   * refusal of a busy lock names it (`123`, or `1:2` for the two-integer
   * form). A server waiting for the lock in its client's stead asks this
   * before running the client's statement again.
   */
  advisoryLockHolders(key: string): number[]
  /**
   * The key of the advisory lock (`n`, or `a:b` for the two-integer form)
   * an exec was last refused with 55P03 because another client holds it;
   * each refusal is told once, undefined when there was none since.
   */
  takeRefusedLock(): string | undefined
  /**
   * Requests the engine has run so far, by anyone: a count that only grows
   * (within one engine: compare with {@link restarts}). Equal at two leases,
   * nothing ran between them, so the session is as the first one left it.
   */
  readonly requests: number
  /**
   * Statements run so far that may have changed what a prepared statement
   * refers to (DDL however it ran, `search_path`, the rollback of a
   * transaction with DDL): a count that only grows, within one engine. A
   * statement cached while it had another value must be parsed again.
   */
  readonly catalogChanges: number
  /**
   * The engine's heap in use and in-memory files as a share (0-1, more past
   * it) of `maxMemory`; 0 when none is set. A server measures each client's
   * session-wide objects with it and refuses new ones past the client's
   * share, so that one client's cannot take the memory the others'
   * statements need. It walks the engine's memory contexts: not for every
   * statement.
   */
  memoryShare(): number
  /**
   * What `pg_stat_activity` (`pg_stat_get_activity()`) lists for everyone
   * from now on, instead of the engine's one backend: a server reports its
   * clients (their pids as `pg_backend_pid()` gives them). Undefined puts
   * the engine's own row back, and so does the function returning
   * undefined. It must not call the instance.
   */
  reportActivity(rows: (() => readonly ActivityRow[] | undefined) | undefined): void
  /** Lets queued calls run again. Idempotent. */
  release(): void
}

/** A client of a server on one instance, as {@link EngineLease.runFor} names it. */
export interface LeaseClient {
  /** Identifies the client's session-level advisory locks. */
  readonly id: number
  /** What `pg_backend_pid()` returns to it: the process id its BackendKeyData gave it. */
  readonly pid: number
  /**
   * Asked before each statement of this client that names a prepared
   * statement, a cursor, a LISTEN channel or a setting, or reaches all of
   * them (`DEALLOCATE`, `EXECUTE`, `PREPARE`, `CLOSE`, `DECLARE`, `FETCH`,
   * `MOVE`, `LISTEN`, `UNLISTEN`, `SET`, `RESET`, `DISCARD ALL`/`TEMP`, and
   * each `set_config()` call as `SET`), with the name as Postgres parsed
   * it, also in dynamic SQL and in functions. A refusal is raised as that
   * statement's ERROR. It must not call the instance.
   */
  readonly checkUtility?: (statement: UtilityStatement) => UtilityRefusal | undefined
  /**
   * The engine's name for a prepared statement this client's SQL names
   * (`PREPARE`, `EXECUTE`, `DEALLOCATE`, and the `EXECUTE` in `EXPLAIN` and
   * `CREATE TABLE AS`), in its own statements and in dynamic SQL, given
   * after {@link checkUtility} saw the name as written: a server gives each
   * client its own namespace, as each PostgreSQL backend has one. It must
   * not call the instance.
   */
  readonly statementName?: (name: string) => string
  /**
   * Called when this client's `pg_terminate_backend(pid)` or
   * `pg_cancel_backend(pid)` names a pid that is no client of this
   * instance (a server's client of another database): true when the server
   * knows the pid and acts on it, which the function then returns. It must
   * not call the instance.
   */
  readonly signalOther?: (pid: number, signal: 'terminate' | 'cancel') => boolean
}
