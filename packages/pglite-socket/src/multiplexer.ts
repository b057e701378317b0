import type { EngineLease } from '@pgwasm/pglite'
import { Msg, concat, cstrings, frame, int32s } from './wire.js'

/** A NotificationResponse as the backend would send it (process id unknown here: 0). */
function notificationFrame(channel: string, payload: string): Uint8Array {
  return frame(Msg.Notification, concat([int32s(0), cstrings(channel, payload)]))
}

/** The part of a PGlite instance the server uses. */
export interface SocketDatabase {
  lease(): Promise<EngineLease>
  onNotification(callback: (channel: string, payload: string) => void): () => void
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<{ rows: T[] }>
  close(): Promise<void>
  readonly closed: boolean
  readonly dataDir?: string
}

/** What the multiplexer needs from a client session. */
export interface MuxClient {
  /** Whether the client must keep the engine after this batch (in a transaction, or before Sync). */
  readonly pinned: boolean
  /** Receives a NotificationResponse frame for a channel it listens to. */
  deliverNotification(frame: Uint8Array): void
}

/** How long an idle lease is kept for the next socket batch. */
const IDLE_LEASE_MS = 1

interface Waiter {
  client: MuxClient
  resolve: () => void
  reject: (err: unknown) => void
}

/**
 * Schedules many clients onto the one backend session of a database. A
 * client runs a batch when it holds the engine; it keeps it while pinned
 * (inside a transaction, or inside an extended-protocol sequence before its
 * Sync), others wait in a FIFO. Between batches of unpinned clients the
 * engine goes back to the instance's own queue when an in-process caller
 * waits there, or 1 ms after the last batch, so those callers get their turn
 * too.
 */
export class Multiplexer {
  readonly db: SocketDatabase
  #owner: MuxClient | undefined
  #lease: EngineLease | undefined
  #leasing: Promise<void> | undefined
  #idleRelease: ReturnType<typeof setTimeout> | undefined
  /**
   * Moves on whenever a later Parse of the same SQL might resolve or read
   * differently than an earlier one (see UnnamedStatementCache): statements
   * cached at an older epoch are parsed again.
   */
  cacheEpoch = 0
  #waiters: Waiter[] = []
  /** Channel -> clients that LISTEN on it. */
  readonly channels = new Map<string, Set<MuxClient>>()
  #unhook: (() => void) | undefined

  constructor(db: SocketDatabase) {
    this.db = db
  }

  get owner(): MuxClient | undefined {
    return this.#owner
  }

  /**
   * Runs `work` with the engine held for `client`; `work` gets the lease and
   * must be synchronous. The engine stays with the client while it is pinned.
   */
  async run<T>(client: MuxClient, work: (lease: EngineLease) => T): Promise<T> {
    // Always after an await, even with the lease at hand: the in-process
    // bridge hands the reply to `pg` at once, and `pg` cannot take a reply
    // in the middle of its own write of the request.
    await this.#acquire(client)
    try {
      return work(this.#lease!)
    } finally {
      if (!client.pinned) this.release(client)
    }
  }

  async #acquire(client: MuxClient): Promise<void> {
    if (this.#owner === client) {
      // Its lease may still be on the way (a cleanup racing its own batch).
      if (this.#leasing) await this.#leasing
      return
    }
    if (this.#owner) {
      await new Promise<void>((resolve, reject) => this.#waiters.push({ client, resolve, reject }))
      // The previous owner handed the engine over: #owner is `client` now.
      return
    }
    this.#owner = client
    // A lease kept from the last batch needs no new one.
    if (!this.#lease) await this.#takeLease(client)
  }

  /** Gets the instance's lease for the owner; every later step waits for it. */
  #takeLease(client: MuxClient): Promise<void> {
    const leasing = this.db.lease().then(
      (lease) => {
        this.#lease = lease
        // In-process callers may have run anything since the engine was last ours.
        this.cacheEpoch++
      },
      (err: unknown) => {
        if (this.#owner === client) this.#owner = undefined
        this.#wakeNext()
        throw err
      },
    )
    this.#leasing = leasing
    void leasing
      .finally(() => {
        if (this.#leasing === leasing) this.#leasing = undefined
      })
      .catch(() => {})
    return leasing
  }

  /** Gives the engine back (to the next waiting client, or to the instance). */
  release(client: MuxClient): void {
    if (this.#owner !== client) return
    if (this.#leasing) {
      // Never drop a lease that is still arriving: it would hold the instance forever.
      void this.#leasing.then(
        () => this.release(client),
        () => {},
      )
      return
    }
    const lease = this.#lease
    const next = this.#waiters[0]
    if (lease && next && !lease.othersWaiting) {
      // Hand the held engine straight to the next client: going back through
      // the instance's queue costs more than the request itself under load.
      // In-process callers waiting there make us return it instead.
      this.#waiters.shift()
      this.#owner = next.client
      next.resolve()
      return
    }
    this.#owner = undefined
    if (lease && !next && !lease.othersWaiting) {
      this.#keepLeaseForNow()
      return
    }
    lease?.release()
    this.#lease = undefined
    this.#wakeNext()
  }

  /**
   * Keeps the lease after a batch when nobody waits for it. The next
   * client's batch then needs no new lease from the instance's queue (a
   * promise round trip per batch), and statements the clients cached stay
   * trusted (a new lease means in-process callers may have changed
   * anything). It goes back after {@link IDLE_LEASE_MS} without a batch, or
   * at the end of the next batch once an in-process caller waits for it.
   */
  #keepLeaseForNow(): void {
    if (this.#idleRelease) this.#idleRelease.refresh()
    else this.#idleRelease = setTimeout(this.#releaseIdle, IDLE_LEASE_MS)
  }

  readonly #releaseIdle = (): void => {
    this.#idleRelease = undefined
    if (this.#owner !== undefined || !this.#lease) return
    this.#lease.release()
    this.#lease = undefined
  }

  #wakeNext(): void {
    const next = this.#waiters.shift()
    if (!next) return
    this.#owner = next.client
    this.#takeLease(next.client).then(
      () => next.resolve(),
      (err: unknown) => next.reject(err),
    )
  }

  /** Removes a client from the queue (it disconnected while waiting). */
  forget(client: MuxClient): void {
    const gone = this.#waiters.filter((w) => w.client === client)
    this.#waiters = this.#waiters.filter((w) => w.client !== client)
    for (const w of gone) w.reject(new Error('the client disconnected while waiting for the database'))
    for (const [channel, set] of this.channels) {
      set.delete(client)
      if (set.size === 0) this.channels.delete(channel)
    }
    this.#maybeUnhook()
  }

  listen(client: MuxClient, channel: string): void {
    let set = this.channels.get(channel)
    if (!set) this.channels.set(channel, (set = new Set()))
    set.add(client)
    // Every notification of the session reaches the instance's listeners,
    // whichever API or client ran the NOTIFY: route from there.
    this.#unhook ??= this.db.onNotification((ch, payload) => this.#deliver(ch, payload))
  }

  #deliver(channel: string, payload: string): void {
    const set = this.channels.get(channel)
    if (!set) return
    const frame = notificationFrame(channel, payload)
    for (const client of set) client.deliverNotification(frame)
  }

  #maybeUnhook(): void {
    if (this.channels.size > 0 || !this.#unhook) return
    this.#unhook()
    this.#unhook = undefined
  }

  /** Stops routing `channel` to `client`; true when nobody listens to it any more. */
  unlisten(client: MuxClient, channel: string): boolean {
    const set = this.channels.get(channel)
    if (!set) return true
    set.delete(client)
    if (set.size > 0) return false
    this.channels.delete(channel)
    this.#maybeUnhook()
    return true
  }
}
