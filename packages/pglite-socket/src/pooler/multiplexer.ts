import { Backend } from '@pgwasm/pglite/protocol'
import type { ActivityRow, EngineLease, LeaseClient } from '@pgwasm/pglite'
import { applyClientSettings, meaningChanges, NO_SETTINGS, readClientSettings, sameSettings, type ClientSettings, type SessionDefaults } from './session-settings.js'
import { deadlockOf, LockWaitFailure, type LockWaiter } from '../sql/lock-wait.js'
import { SessionObjects } from './session-objects.js'
import { LoginSettings } from './login-settings.js'
import { readReported, type ReportedSettings } from './reported-settings.js'
import { concat, cstrings, frame, int32s, queryMessage, readRows } from '../wire/wire.js'

/** A NotificationResponse as the backend would send it, from the process id the sender's client was given (0: an in-process caller). */
function notificationFrame(processId: number, channel: string, payload: string): Uint8Array {
  return frame(Backend.NotificationResponse, concat([int32s(processId), cstrings(channel, payload)]))
}

/** The part of a PGlite instance the server uses. */
export interface SocketDatabase {
  lease(): Promise<EngineLease>
  onNotification(callback: (channel: string, payload: string) => void): () => void
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<{ rows: T[] }>
  close(): Promise<void>
  readonly closed: boolean
  readonly dataDir?: string
  /** Runs the session as a role for good (see `PGlite.lockSessionUser`); needed for the `role` option. */
  lockSessionUser?(role: string): Promise<void>
}

/** What the multiplexer needs from a client session. */
export interface MuxClient {
  /** Whether the client must keep the engine after this batch (in a transaction, or before Sync). */
  readonly pinned: boolean
  /** Receives a NotificationResponse frame for a channel it listens to. */
  deliverNotification(frame: Uint8Array): void
  /** The process id its BackendKeyData gave it: notifications it sends carry it. @default 0 */
  readonly processId?: number
  /** Its own session settings, put back on the session when it takes the engine (session-settings.ts). */
  settings?: ClientSettings
  /**
   * The user it logged in as, until its first batch put the stored
   * `ALTER ROLE/DATABASE ... SET` settings for it under its own (login-settings.ts).
   */
  loginUser?: string
  /** Its last batch may have changed a setting: they are read again when it lets the engine go. */
  settingsChanged?: boolean
  /**
   * Set when the server put settings on the session for it that others had
   * changed (its own, or the host's): what it was told of the reported
   * settings may be out of date.
   */
  reportDue?: boolean
  /** Its row of `pg_stat_activity`; `running`: its statement is the one the engine runs. */
  activity?(running: boolean): ActivityRow
  /** Whether it is gone (nothing of it is read or restored any more). */
  readonly closed?: boolean
  /** Ends its connection with a FATAL error (`pg_terminate_backend()` of its pid). */
  terminate?(code: string, message: string): void
  /**
   * Asked while it is pinned between batches and others wait: lets its
   * transaction block go from the engine if nothing of it would be lost
   * (session/transaction-parking.ts); true when it did, and it is not
   * pinned any more.
   */
  park?(lease: EngineLease): boolean
  /** Who it is to the engine (`processId` as id and pid), made once rather than per batch. */
  readonly leaseClient?: LeaseClient
  /** The longest one of its requests may run before it is canceled (57014); undefined: no limit. */
  readonly timeLimitMs?: number
  /**
   * Whether its running request is to stop (a CancelRequest came, or it
   * left): asked while the engine runs it (`EngineLease.stopWhen`), so it
   * must not wait for anything.
   */
  readonly stopRequested?: () => boolean
}

const TERMINATED = 'terminating connection due to administrator command'

/** How long a login waits for the engine to read the roles and settings before it goes on with what it knows. */
const LOGIN_WAIT_MS = 200

/** A role a client logs in as: `unknown` when the roles could not be read yet. */
/** What the cancel helper needs to start a client of one database (see {@link Multiplexer.doorFacts}). */
export interface DoorFacts {
  /** The reported settings the last client to log in was told, as name-value pairs. */
  readonly reported: readonly (readonly [string, string])[]
  /** The roles that may log in. */
  readonly logins: readonly string[]
}

export type LoginRole = 'login' | 'nologin' | 'missing' | 'unknown'

const ROLES = queryMessage('select rolname::text, rolcanlogin::text from pg_catalog.pg_roles')

/** What the engine is told for a client without a process id: an in-process caller's identity. */
const NO_CLIENT: LeaseClient = { id: 0, pid: 0 }

/** How often the clients waiting for an advisory lock are looked at when no batch ran. */
const LOCK_RECHECK_MS = 100

/** How long an idle lease is kept for the next socket batch. */
const IDLE_LEASE_MS = 1

interface LockWaitEntry extends LockWaiter {
  readonly client: MuxClient
  readonly since: number
  readonly lockMs: number
  readonly statementMs: number
  readonly deadlockMs: number
  wake(): void
  fail(err: Error): void
}

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
  /**
   * The client whose request just ran. The engine hands out a request's
   * notifications in microtasks queued during it, when the engine may have
   * passed to another client already; a microtask queued after them clears
   * this, so a NOTIFY from an in-process caller reads 0.
   */
  #lastRunner: MuxClient | undefined
  readonly #clearRunner = (): void => {
    this.#lastRunner = undefined
  }
  #lease: EngineLease | undefined
  #leasing: Promise<void> | undefined
  /** A client's work runs on the engine (a wait inside it, for a lease, may let others in here). */
  #inBatch = false
  readonly #loginSettings = new LoginSettings()
  #idleRelease: ReturnType<typeof setTimeout> | undefined
  /**
   * Moves on whenever a later Parse of the same SQL might resolve or read
   * differently than an earlier one (see UnnamedStatementCache): statements
   * cached at an older epoch are parsed again.
   */
  cacheEpoch = 0
  /**
   * The engine's `idle_session_timeout` (ms, 0: off) as last read. A plain
   * SET is shared by every client of the one session, so this is too; it is
   * read again after anything that may have changed it (see readSettings).
   */
  idleSessionTimeoutMs = 0
  #waiters: Waiter[] = []
  /** The session-wide objects its clients made, by client (dropped when one disconnects). */
  readonly objects = new SessionObjects<MuxClient>()
  /** Channel -> clients that LISTEN on it. */
  readonly channels = new Map<string, Set<MuxClient>>()
  #unhook: (() => void) | undefined
  /** Called while any statement of the engine computes, an in-process caller's too (`EngineLease.whileBusy`). */
  readonly whileBusy: (() => void) | undefined

  constructor(db: SocketDatabase, whileBusy?: () => void) {
    this.db = db
    this.whileBusy = whileBusy
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
    this.#lastRunner = client
    const lease = this.#lease!
    try {
      lease.limitTime(client.timeLimitMs)
      lease.stopWhen(client.stopRequested)
      if (client.processId !== undefined && !client.closed) this.#clients.set(client.processId, client)
      if (client.loginUser !== undefined && !client.closed) {
        lease.runFor(NO_CLIENT)
        client.settings = this.#loginSettings.forLogin(lease, client.loginUser, client.settings ?? NO_SETTINGS)
        client.loginUser = undefined
      }
      this.#restoreSettings(client, lease)
      // pg_backend_pid(), session advisory locks and the utility rules answer for this client.
      lease.runFor(client.leaseClient ?? NO_CLIENT)
      // Its temporary relations by their names, and no other client's.
      if (!client.closed && this.objects.switchTo(lease, client)) this.cacheEpoch++
      this.#inBatch = true
      return work(lease)
    } finally {
      this.#inBatch = false
      this.#endTerminated(lease)
      if (this.#unhook) queueMicrotask(this.#clearRunner)
      if (!client.pinned) {
        this.#keepSettings(client, lease)
        this.release(client)
      }
    }
  }

  /**
   * The settings the session has, as a client's batch last left them or we
   * last put them (kept across leases: in-process callers' own SETs are
   * theirs to share, see the README).
   */
  #sessionSettings: ClientSettings | undefined

  #restoreSettings(client: MuxClient, lease: EngineLease): void {
    const wanted = client.settings ?? NO_SETTINGS
    const current = this.#sessionSettings ?? NO_SETTINGS
    if (sameSettings(wanted, current)) {
      this.#sessionSettings = wanted
      return
    }
    try {
      // The server's own statements, not the client's (nor the last one's).
      lease.runFor(NO_CLIENT)
      applyClientSettings(lease, wanted, current)
    } catch {
      return // The engine died: the batch reports it.
    }
    this.#sessionSettings = wanted
    client.reportDue = true
    // search_path, TimeZone...: SQL may read differently now (a pg client's
    // client_encoding alone, put back on every lease, does not change it).
    if (meaningChanges(wanted, current)) this.cacheEpoch++
    // idle_session_timeout is read again.
    this.readSettings(lease)
  }

  #keepSettings(client: MuxClient, lease: EngineLease): void {
    if (!client.settingsChanged || client.closed) return
    client.settingsChanged = false
    try {
      client.settings = readClientSettings(lease, this.#defaults)
    } catch {
      return
    }
    this.#sessionSettings = client.settings
  }

  async #acquire(client: MuxClient): Promise<void> {
    if (this.#owner === client) {
      // Its lease may still be on the way (a cleanup racing its own batch).
      if (this.#leasing) await this.#leasing
      return
    }
    if (this.#owner) {
      const turn = new Promise<void>((resolve, reject) => this.#waiters.push({ client, resolve, reject }))
      this.#parkOwner()
      await turn
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
        // pg_stat_activity lists this server's clients, also to in-process callers.
        lease.reportActivity(this.#activity)
        // In-process callers' long statements open the door to new clients too.
        lease.whileBusy(this.whileBusy)
        lease.whenOthersWait(this.#callerWaits)
        if (lease.restarts !== this.#restarts) this.#engineRestarted(lease)
        // Nothing ran since the engine was last ours: the session is as we left it.
        if (lease.restarts === this.#returned.restarts && lease.requests === this.#returned.requests) {
          this.#sessionSettings = this.#hostSettings
          return
        }
        this.objects.markStale()
        // In-process callers may have run anything since the engine was last ours.
        this.cacheEpoch++
        this.readSettings(lease)
        // Theirs to find again when the lease goes back: no client's SET reaches them.
        this.#hostSettings = readClientSettings(lease, this.#defaults)
        this.#sessionSettings = this.#hostSettings
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

  /** The rows of `pg_stat_activity`: each client that is still connected (undefined: none, the engine's own row). */
  readonly #activity = (): readonly ActivityRow[] | undefined => {
    const rows: ActivityRow[] = []
    for (const client of this.#clients.values()) {
      if (client.closed || !client.activity) continue
      rows.push(client.activity(client === this.#lastRunner))
    }
    return rows.length > 0 ? rows : undefined
  }

  /** Roles by name (true: may log in), as last read, and the engine's `catalogChanges` then. */
  #roles: { readonly catalog: number; readonly canLogin: ReadonlyMap<string, boolean> } | undefined

  /**
   * What a client logging in as `user` needs from the engine: whether the
   * role may log in, and the reported settings as the client will see them
   * (its startup settings put on the session). A client in a transaction
   * block holds the engine, and a login must not wait for it: the roles
   * are then the ones last read (undefined: not known), and the settings
   * not read.
   */
  async login(client: MuxClient, user: string): Promise<{ role: LoginRole; reported: ReportedSettings | undefined }> {
    const owner = this.#owner
    const unread = { role: this.#loginRole(user), reported: undefined }
    if (owner && owner !== client && owner.pinned) return unread
    const read = this.run(client, (lease) => {
      if (this.#roles?.catalog !== lease.catalogChanges) {
        const rows = readRows(lease, ROLES)
        if (rows) this.#roles = { catalog: lease.catalogChanges, canLogin: new Map(rows.map(([name, login]) => [name!, login === 'true'])) }
      }
      const reported = readReported(lease)
      if (reported) this.#lastReported = reported
      client.reportDue = false
      return { role: this.#loginRole(user), reported }
    })
    // An in-process caller's transaction (or a long statement) may hold the
    // engine: a login does not wait for it any more than on PostgreSQL.
    let timer: ReturnType<typeof setTimeout> | undefined
    const late = new Promise<typeof unread>((resolve) => (timer = setTimeout(() => resolve(unread), LOGIN_WAIT_MS)))
    try {
      return await Promise.race([read, late])
    } finally {
      clearTimeout(timer)
      read.catch(() => {})
    }
  }

  /** The settings the last client to log in was told. */
  #lastReported: ReportedSettings | undefined

  /**
   * What the cancel helper needs to start a client here while the engine
   * runs a statement: the settings the last client was told (what differs
   * for a new one is reported to it afterwards) and the roles that may log
   * in; undefined before a login read them.
   */
  doorFacts(): DoorFacts | undefined {
    const roles = this.#roles
    if (!roles || !this.#lastReported) return undefined
    const logins: string[] = []
    for (const [name, canLogin] of roles.canLogin) if (canLogin) logins.push(name)
    return { reported: [...this.#lastReported], logins }
  }

  #loginRole(user: string): LoginRole {
    const roles = this.#roles
    if (!roles) return 'unknown'
    const canLogin = roles.canLogin.get(user)
    return canLogin === undefined ? 'missing' : canLogin ? 'login' : 'nologin'
  }

  /** Reads the engine's session-wide settings the server acts on. */
  readSettings(lease: EngineLease): void {
    this.idleSessionTimeoutMs = lease.sessionTimeouts.idleSessionTimeout
  }

  /** Whether clients, or in-process callers of the instance, wait for the engine. */
  get othersWait(): boolean {
    return this.#waiters.length > 0 || (this.#lease?.othersWaiting ?? false)
  }

  /** An in-process caller started to wait for the engine: a pinned owner parks its block if it can, on a later turn. */
  readonly #callerWaits = (): void => queueMicrotask(() => this.#parkOwner())

  /**
   * A client (or an in-process caller) now waits behind an owner that holds
   * the engine between its batches, in a transaction block: the owner parks
   * the block if it can, and the engine goes to the waiters.
   */
  #parkOwner(): void {
    const owner = this.#owner
    const lease = this.#lease
    if (!owner?.pinned || !owner.park || !lease || this.#leasing || this.#inBatch) return
    if (!owner.park(lease)) return
    this.#keepSettings(owner, lease)
    this.release(owner)
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
    this.#giveBack(lease)
    this.#wakeNext()
  }

  /** The settings in-process callers had when the lease was taken. */
  #hostSettings: ClientSettings = NO_SETTINGS
  readonly #defaults: SessionDefaults = {}

  /** Returns the lease to the instance, its session settings as in-process callers left them. */
  #giveBack(lease: EngineLease | undefined): void {
    if (lease) {
      const current = this.#sessionSettings ?? NO_SETTINGS
      if (!sameSettings(current, this.#hostSettings)) {
        try {
          lease.runFor(NO_CLIENT)
          applyClientSettings(lease, this.#hostSettings, current)
        } catch {
          // The engine died: nothing of the session is left to restore.
        }
      }
      this.#sessionSettings = undefined
      this.#returned = { restarts: lease.restarts, requests: lease.requests }
      lease.release()
    }
    this.#lease = undefined
  }

  /** The engine's counts when the lease went back (see EngineLease.requests). */
  #returned = { restarts: -1, requests: -1 }

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
    this.#giveBack(this.#lease)
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

  /** How many times the instance had started its engine again, as of our last lease. */
  #restarts = 0

  /**
   * The engine died and the instance started a new one on what it stored: no
   * client's session state survived (its settings, statements, temporary
   * tables, locks). As PostgreSQL does after a backend crash, every client
   * connected before it is ended (57P02), before any batch of theirs runs
   * on the new session; new connections are served as usual.
   */
  #engineRestarted(lease: EngineLease): void {
    this.#restarts = lease.restarts
    this.#sessionSettings = undefined
    for (const client of this.#clients.values()) {
      queueMicrotask(() =>
        client.terminate?.('57P02', 'terminating connection because the database engine failed and was started again with crash recovery; committed transactions are kept'),
      )
    }
    this.#clients.clear()
  }

  /** Clients by process id, for pg_terminate_backend(). */
  readonly #clients = new Map<number, MuxClient>()
  /** Clients waiting for a session advisory lock to be let go of (lock-wait.ts). */
  #lockWaiters: LockWaitEntry[] = []
  #lockCheck: ReturnType<typeof setInterval> | undefined

  /** Ends the clients the last batch's pg_terminate_backend() named, once that batch's replies are out; looks at the lock waiters. */
  #endTerminated(lease: EngineLease): void {
    this.endTerminated(lease, undefined)
    if (this.#lockWaiters.length > 0) this.#checkLockWaiters(lease)
  }

  /**
   * Ends the clients `pg_terminate_backend()` named since the last call
   * (after the statement that named them). True when `runner`, whose
   * statement it was, named itself: PostgreSQL fails that very statement
   * with the FATAL, so the runner's output must not go out.
   */
  endTerminated(lease: EngineLease, runner: MuxClient | undefined): boolean {
    let self = false
    for (const id of lease.takeTerminations()) {
      const target = this.#clients.get(id)
      if (target === runner && runner !== undefined) self = true
      else if (target) queueMicrotask(() => target.terminate?.('57P01', TERMINATED))
    }
    return self
  }

  /**
   * Resolves when the session advisory lock `key` is free for `client`
   * (its statement then runs again), or rejects with PostgreSQL's error:
   * 40P01 when it waits in a deadlock for its `deadlock_timeout`, 55P03
   * past its `lock_timeout`, 57014 past its `statement_timeout` (counted
   * from `since`, when the statement first ran), or when it disconnects.
   */
  lockReleased(client: MuxClient, key: string, since: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const ms = (name: string, fallback: number): number => Number(client.settings?.get(name) ?? fallback) || 0
      const entry: LockWaitEntry = {
        client,
        pid: client.processId ?? 0,
        key,
        since,
        lockMs: ms('lock_timeout', 0),
        statementMs: ms('statement_timeout', 0),
        deadlockMs: ms('deadlock_timeout', 1000),
        wake: () => {
          this.#dropLockWaiter(entry)
          resolve()
        },
        fail: (err: Error) => {
          this.#dropLockWaiter(entry)
          reject(err)
        },
      }
      this.#lockWaiters.push(entry)
      // Releases by in-process callers, timeouts and deadlocks pass no client batch: looked at on a timer.
      this.#lockCheck ??= setInterval(() => void this.#checkLockWaitersSoon(), LOCK_RECHECK_MS)
    })
  }

  #dropLockWaiter(entry: LockWaitEntry): void {
    this.#lockWaiters = this.#lockWaiters.filter((w) => w !== entry)
    if (this.#lockWaiters.length === 0 && this.#lockCheck) {
      clearInterval(this.#lockCheck)
      this.#lockCheck = undefined
    }
  }

  /** Wakes each waiter whose lock is free, and fails those past a timeout or in a deadlock. */
  #checkLockWaiters(lease: EngineLease): void {
    const now = performance.now()
    const holders = (key: string): number[] => lease.advisoryLockHolders(key)
    const waiting = new Map(this.#lockWaiters.map((w) => [w.pid, w]))
    for (const w of [...this.#lockWaiters]) {
      if (holders(w.key).every((pid) => pid === w.pid)) {
        w.wake()
        continue
      }
      const waited = now - w.since
      if (w.statementMs > 0 && waited >= w.statementMs) w.fail(new LockWaitFailure('57014', 'canceling statement due to statement timeout'))
      else if (w.lockMs > 0 && waited >= w.lockMs) w.fail(new LockWaitFailure('55P03', 'canceling statement due to lock timeout'))
      else if (waited >= w.deadlockMs) {
        const report = deadlockOf(w, holders, waiting)
        if (report === undefined) continue
        waiting.delete(w.pid)
        w.fail(new LockWaitFailure('40P01', 'deadlock detected', report))
      }
    }
  }

  /** {@link #checkLockWaiters} with the engine: the idle lease, or one borrowed from in-process callers. */
  async #checkLockWaitersSoon(): Promise<void> {
    // A batch runs: its end looks at them.
    if (this.#owner !== undefined || this.#lookingAtLocks) return
    if (this.#lease) return this.#checkLockWaiters(this.#lease)
    this.#lookingAtLocks = true
    try {
      const lease = await this.db.lease()
      try {
        this.#checkLockWaiters(lease)
      } finally {
        lease.release()
      }
    } catch {
      // Closed or failed: the waiters' own batches report it.
    } finally {
      this.#lookingAtLocks = false
    }
  }

  #lookingAtLocks = false

  /**
   * Fails `client`'s wait for the engine (its turn in the queue, or an
   * advisory lock) with `reason`; false when it does not wait (its batch
   * runs, or it holds the engine).
   */
  abandonWaiting(client: MuxClient, reason: Error): boolean {
    const queued = this.#waiters.findIndex((w) => w.client === client)
    if (queued >= 0) {
      this.#waiters.splice(queued, 1)[0]!.reject(reason)
      return true
    }
    const locked = this.#lockWaiters.find((w) => w.client === client)
    if (!locked) return false
    this.#lockWaiters = this.#lockWaiters.filter((w) => w !== locked)
    locked.fail(reason)
    return true
  }

  /** Removes a client from the queue (it disconnected while waiting). */
  forget(client: MuxClient): void {
    if (client.processId !== undefined && this.#clients.get(client.processId) === client) this.#clients.delete(client.processId)
    const gaveUp = this.#lockWaiters.filter((w) => w.client === client)
    this.#lockWaiters = this.#lockWaiters.filter((w) => w.client !== client)
    for (const w of gaveUp) w.fail(new Error('the client disconnected while waiting for an advisory lock'))
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
    const frame = notificationFrame(this.#lastRunner?.processId ?? 0, channel, payload)
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
