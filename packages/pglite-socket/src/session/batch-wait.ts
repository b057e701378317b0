import { Frontend } from '@pgwasm/pglite/protocol'
import type { EngineLease } from '@pgwasm/pglite'
import type { Multiplexer, MuxClient } from '../pooler/multiplexer.js'
import { LockWaitFailure, busyLockKey, mayWaitForAdvisoryLock } from '../sql/lock-wait.js'
import { concat, decodeUtf8, errorResponse, readInt32, readyForQuery, statusLetter } from '../wire/wire.js'
import { isOneRequest } from './frame-edits.js'
import type { SessionHost, Transport } from './session-host.js'

/** Why a batch that waited for the engine did not run: its client sent a CancelRequest. */
const CANCELED = new Error('canceled by a CancelRequest')

const EMPTY = new Uint8Array(0)

/** What a batch's wait for the engine needs of its session. */
export interface BatchWaitHost {
  /** The session as its multiplexer knows it. */
  readonly client: MuxClient
  readonly server: Pick<SessionHost, 'signal'>
  readonly transport: Pick<Transport, 'write'>
  /** Its multiplexer (once attached). */
  readonly mux: Multiplexer | undefined
  /** The last ReadyForQuery status byte the client was sent. */
  readonly status: number
  readonly inTransaction: boolean
  /** An extended-protocol sequence is open (no Sync after it yet). */
  readonly unsynced: boolean
  isClosed(): boolean
}

/**
 * A client's batch on its way to the engine: its wait behind the other
 * clients, its wait for a busy advisory lock, and a CancelRequest that
 * ends either.
 */
export class BatchWait {
  readonly #host: BatchWaitHost
  /** The batch that waits for the engine or runs on it; EMPTY between batches. */
  #message: Uint8Array = EMPTY
  /** The batch may wait for a busy advisory lock; #lockBusy: the key its last run was refused. */
  #lockWait = false
  #lockBusy: string | undefined

  constructor(host: BatchWaitHost) {
    this.#host = host
  }

  /** The batch to run (EMPTY when none waits or runs). */
  get message(): Uint8Array {
    return this.#message
  }

  /** Whether a batch waits for the engine or runs on it. */
  get active(): boolean {
    return this.#message !== EMPTY
  }

  /**
   * Runs `message` on `lease`, its output to `onOutput`. A batch that may
   * wait for an advisory lock is run for its whole reply first: false when
   * it found the lock busy (rolled back whole and idle again, nothing sent;
   * it runs again once the lock is free).
   */
  execute(lease: EngineLease, message: Uint8Array, onOutput: (bytes: Uint8Array) => void): boolean {
    if (!this.#lockWait) {
      lease.execProtocolRawStream(message, onOutput)
      return true
    }
    const chunks: Uint8Array[] = []
    // A refusal left from an earlier batch is not this one's.
    lease.takeRefusedLock()
    lease.execProtocolRawStream(message, (bytes) => chunks.push(bytes.slice()))
    const reply = concat(chunks)
    const busy = busyLockKey(reply, lease.takeRefusedLock())
    if (busy !== undefined) {
      this.#lockBusy = busy
      return false
    }
    onOutput(reply)
    return true
  }

  /** Runs `message` with `work` once the engine is this client's (again after each busy lock). */
  async run(message: Uint8Array, work: (lease: EngineLease) => void): Promise<void> {
    const host = this.#host
    this.#message = message
    this.#terminateHolderFirst(message)
    try {
      // A lone Query outside a transaction that takes an advisory lock waits for it (lock-wait.ts).
      this.#lockWait = !host.inTransaction && !host.unsynced && mayWaitForAdvisoryLock(message)
      const since = performance.now()
      for (;;) {
        this.#lockBusy = undefined
        await host.mux!.run(host.client, work)
        if (this.#lockBusy === undefined || host.isClosed()) break
        await host.mux!.lockReleased(host.client, this.#lockBusy, since)
      }
    } catch (err) {
      if (err instanceof LockWaitFailure) {
        // The wait ended without the lock: its statement's error, as PostgreSQL's wait would end.
        host.transport.write(concat([errorResponse(err.code, err.message, 'ERROR', err.detail), readyForQuery(statusLetter(host.status))]))
        return
      }
      if (err !== CANCELED) throw err
      // Nothing of the batch ran (or what ran was rolled back, for a lock wait): one request, one error.
      host.transport.write(concat([errorResponse('57014', 'canceling statement due to user request'), readyForQuery(statusLetter(host.status))]))
    } finally {
      this.#lockWait = false
      this.#message = EMPTY
    }
  }

  /**
   * A CancelRequest for this client (CancelTarget): a batch that waits for
   * the engine, behind another client or for an advisory lock, fails with
   * 57014 instead of running. Only a batch that is one request (one simple
   * Query, or one extended sequence up to its Sync) is canceled this way:
   * the error and ReadyForQuery then answer it whole.
   */
  cancel(): boolean {
    const mux = this.#host.mux
    if (!mux || !isOneRequest(this.#message)) return false
    return mux.abandonWaiting(this.#host.client, CANCELED)
  }

  /**
   * `select pg_terminate_backend(<pid>)` (a lone Query, as pools and psql
   * send it) of the client that holds the engine in its transaction: that
   * client ends now, as on PostgreSQL, rather than after it lets the engine
   * go, which this statement would wait for. The statement then runs and
   * answers true (see DatabaseHost.signal).
   */
  #terminateHolderFirst(message: Uint8Array): void {
    const owner = this.#host.mux?.owner
    if (!owner || owner === this.#host.client || !owner.pinned || owner.processId === undefined || message[0] !== Frontend.Query) return
    if (readInt32(message, 1) + 1 !== message.length) return
    const pid = terminatedPid(decodeUtf8(message.subarray(5, message.length - 1)))
    if (pid === owner.processId) this.#host.server.signal(pid, 'terminate')
  }
}

/** The pid a `select pg_terminate_backend(<pid>)` names, or undefined for any other SQL. */
function terminatedPid(sql: string): number | undefined {
  const match = /^\s*select\s+(?:pg_catalog\.)?pg_terminate_backend\s*\(\s*(\d{1,10})\s*\)\s*(?:as\s+\w+\s*)?;?\s*$/i.exec(sql)
  return match ? Number(match[1]) : undefined
}
