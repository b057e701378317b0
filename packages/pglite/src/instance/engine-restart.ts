/**
 * After the engine died under a directory or idb:// database: Postgres
 * starts again on what is stored (crash recovery replays the WAL, so every
 * committed transaction is kept) and the instance goes on with a new
 * session. Here: that new start, and how the death reads to the callers.
 */
import type { Backend } from '../engine/backend/backend.js'
import { EngineError } from '../engine/engine-error.js'
import type { QueryRunner } from '../query/runner.js'
import { quoteIdent } from '../quote-ident.js'

/** What a new start after a death needs of the instance. */
export interface RestartHost {
  /** Starts the engine again on what the database stores: its directory, or its idb:// store. */
  restart(): Promise<Backend>
  /** Makes `backend` the instance's engine, its session set up as the old one was at its start (role, array types). */
  adopt(backend: Backend): QueryRunner
  /** Channels the instance's `listen()` callbacks need LISTENed. */
  readonly channels: readonly string[]
}

/** Starts a new engine for `dead`, with its locked session user and `listen()` channels; throws when that fails. */
export async function startAgain(dead: Backend, host: RestartHost): Promise<void> {
  const backend = await host.restart()
  const runner = host.adopt(backend)
  if (dead.lockedSessionUser !== undefined) backend.lockSessionUser(dead.lockedSessionUser)
  for (const channel of host.channels) runner.exec(`LISTEN ${quoteIdent(channel)}`, undefined)
}

/** Why the instance closed when starting the engine again failed. */
export function restartFailure(err: unknown): string {
  return `starting the engine again on the data directory failed: ${err instanceof Error ? err.message : String(err)}`
}

/** Where the instance stands after a death, for its wording. */
export interface DeathOutcome {
  readonly dataDir: string | undefined
  /** The instance can start the engine again (a directory or idb:// database). */
  readonly restartable: boolean
  /** The new start is still to come (a lease holds the queue). */
  readonly pending: boolean
  /** The instance is open on another engine than the dead one. */
  readonly replaced: boolean
  readonly closedBecause: string | undefined
}

/** How `dead`'s failure reads to a caller, once the instance did (or did not) start the engine again. */
export function deathError(dead: Backend, at: DeathOutcome): EngineError {
  const error = dead.deadError!
  const { dataDir, restartable, pending } = at
  const reopened = restartable && (pending || at.replaced)
  const from = dataDir?.startsWith('idb://') ? 'IndexedDB' : dataDir?.startsWith('opfs-ahp://') ? 'OPFS' : 'its directory'
  const outcome = pending
    ? `the database is being opened again from ${from}`
    : reopened
      ? `the database was opened again from ${from}`
      : `the instance is closed${at.closedBecause ? `: ${at.closedBecause}` : ''}`
  const lost = reopened
    ? ' (crash recovery): every committed transaction is kept; the statement that was running, the transaction it was in and the session state (settings, prepared statements, temporary tables, cursors, advisory locks) are lost'
    : ''
  return new EngineError(`${error.message}; ${outcome}${lost}`, {
    code: error.code,
    cause: error.cause,
    log: error.log,
    reopened: !restartable || pending ? undefined : reopened,
  })
}
