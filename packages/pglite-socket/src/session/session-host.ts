import { randomInt } from 'node:crypto'
import type { AuthMethod } from './auth.js'
import type { AuthThrottle } from './auth-throttle.js'
import type { Multiplexer } from '../pooler/multiplexer.js'

/** Where a session's bytes come from and go to: a socket, or the in-process bridge. */
export interface Transport {
  write(bytes: Uint8Array): void
  /** Ends the connection after pending writes. */
  end(): void
  /** Where the client connects from (for the password throttle); one key for all when absent. */
  readonly remoteAddress?: string
  /** Its TCP port, for `pg_stat_activity.client_port`. */
  readonly remotePort?: number
  /** Bytes written but not yet taken by the client. */
  readonly backlogBytes?: number
  /** Resolves once the client has taken what was written (or left). */
  drained?(): Promise<void>
  /**
   * Whether the client has closed its side, asked while the engine runs its
   * statement: it must answer at once, from what the kernel holds.
   */
  peerLeft?(): boolean
  /**
   * Reads what the kernel holds for the connection now, while the engine
   * holds this thread (copy-stream.ts): bytes read, 0 for none yet, or
   * PEER_LEFT. Absent where that cannot be done (no descriptor to read).
   */
  readNow?(into: Uint8Array): number
  /** Whether everything read from the connection so far was delivered (so {@link readNow} reads what follows it). */
  readNowReady?(): boolean
}

/** What sessions share: the databases, limits and password settings of a server. */
export interface SessionHost {
  readonly password?: string
  readonly authMethod: AuthMethod
  readonly syncTimeoutMs: number
  readonly maxMessageBytes: number
  /** See HostOptions. */
  readonly idleInTransactionTimeoutMs: number
  /** The longest one request may hold the engine (0: no limit). */
  readonly maxStatementMs: number
  readonly authenticationTimeoutMs: number
  readonly maxCopyBytes: number
  /** See HostOptions; 0: COPY data is held until CopyDone. */
  readonly copyStallMs: number
  readonly authThrottle: AuthThrottle
  readonly serverVersion: string
  /** The role every client runs as (the `role` option), whatever user name it logged in with. */
  readonly role?: string
  /**
   * The multiplexer of the named database, creating its instance on first use.
   * @throws {UnknownDatabaseError} (`code` 'UNKNOWN_DATABASE') for a database it does not have.
   */
  database(name: string): Promise<Multiplexer>
  /** Called after a client ran `DROP DATABASE name`. */
  dropped(name: string): void
  /** A client of database `name` is gone, its cleanup done (the host may unload an idle database). */
  left(name: string): void
  cancel(processId: number, secret: number): void
  /**
   * `pg_terminate_backend()` or `pg_cancel_backend()` of a pid that is no
   * client of the caller's database: true when it is a client of another.
   */
  signal(processId: number, signal: 'terminate' | 'cancel'): boolean
  /** Whether a CancelRequest for this key came while the engine ran its statement (asked while it runs). */
  canceledWhileRunning(processId: number, secret: number): boolean
  /** The session can be reached by CancelRequest from now on, until {@link untrack}. */
  track(session: CancelTarget): void
  untrack(session: CancelTarget): void
  log(message: string): void
}

/** What a CancelRequest reaches. */
export interface CancelTarget {
  readonly processId: number
  readonly secret: number
  /** Fails its statement that waits for the engine with 57014; false when none waits. */
  cancelWaiting(): boolean
  /** Ends its connection with a FATAL error. */
  terminate(code: string, message: string): void
}

let nextProcessId = 1000

/** A process id and cancel secret for a new client, unique in this process. */
export function newProcessKey(): { readonly processId: number; readonly secret: number } {
  return { processId: nextProcessId++, secret: randomInt(1, 0x7fffffff) }
}

/**
 * A client the cancel helper started while the server's thread ran a
 * statement: it already has its AuthenticationOk, ParameterStatus (`told`),
 * cancel key and ReadyForQuery.
 */
export interface StartedElsewhere {
  readonly processId: number
  readonly secret: number
  readonly params: ReadonlyMap<string, string>
  readonly told: ReadonlyMap<string, string>
}
