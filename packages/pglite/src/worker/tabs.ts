/**
 * One database shared by the tabs of an origin. Each tab runs its own
 * worker; the workers elect one leader per database with a Web Lock, and
 * only the leader opens the database. The others forward their page's
 * requests to it over a `BroadcastChannel` and pass its replies back. When
 * the leader's tab goes, its lock goes with it: the next worker in the
 * lock's queue opens the database (an `idb://` one has every acknowledged
 * commit) and announces itself, and calls that were on their way to the
 * old leader fail with `EngineError` code `LEADER_CHANGED`.
 */
import { EngineError } from '../errors.js'
import { encodeError } from './error-codec.js'
import type { Channel } from './port.js'
import type { PGliteWorkerInitOptions } from './options.js'
import type { Reply, Request } from './protocol.js'

/** Between the workers of one database. `epoch` names a leadership (random, never reused): a request names the one it was sent to. */
type TabMessage =
  | { readonly kind: 'request'; readonly from: string; readonly epoch: string; readonly request: Request }
  | { readonly kind: 'reply'; readonly to: string; readonly reply: Reply }
  | { readonly kind: 'leader'; readonly epoch: string }
  /** A new follower asks who leads; the leader answers with `leader`. */
  | { readonly kind: 'who' }

/** Whether this worker can share its database with other tabs: Web Locks and BroadcastChannel in a browser worker. */
export function canShareTabs(): boolean {
  const scope = globalThis as { WorkerGlobalScope?: unknown; navigator?: { locks?: { request?: unknown } } }
  return typeof scope.WorkerGlobalScope === 'function' && typeof BroadcastChannel === 'function' && typeof scope.navigator?.locks?.request === 'function'
}

/**
 * The name tabs share a database by: the page's `id`, else an `idb://`
 * data directory. Undefined: this database is the tab's own (memory, or no
 * way to share).
 */
export function sharedName(options: PGliteWorkerInitOptions): string | undefined {
  if (!canShareTabs()) return undefined
  if (typeof options.id === 'string' && options.id !== '') return `id:${options.id}`
  if (typeof options.dataDir === 'string' && options.dataDir.startsWith('idb://')) return `dir:${options.dataDir}`
  return undefined
}

/** What the tab group needs from this worker's host. */
export interface TabHost {
  /** Opens the database: this worker leads now. Resolves once it is ready to serve. */
  lead(): Promise<void>
  /** Serves a follower tab's requests on a channel of its own; the returned function ends that (the tab went). */
  serveFollower(channel: Channel): () => void
  /** Passes a reply from the leader (or one made here) to this worker's page. */
  toPage(reply: Reply): void
  /** Tells the page that a tab started leading (this one, when `isLeader`). */
  leaderChanged(isLeader: boolean): void
  /** Serves a request of this worker's own page here (it was held before this worker led). */
  serveOwn(request: Request): void
}

const LOCKS = (): LockManager => (globalThis as unknown as { navigator: { locks: LockManager } }).navigator.locks

export class TabGroup {
  readonly #tab = crypto.randomUUID()
  readonly #name: string
  readonly #host: TabHost
  readonly #bc: BroadcastChannel
  #leading = false
  /** The leadership this tab knows of; undefined until a leader answered. */
  #epoch: string | undefined
  /** The id of this page's forwarded `close`: its reply ends this tab's part. */
  #closeId: number | undefined
  /** This page's requests sent to the leader and not answered yet. */
  readonly #pending = new Map<number, Request>()
  /** Requests of this page held until a leader is known. */
  #queued: Request[] = []
  readonly #followers = new Map<string, { deliver: (request: Request) => void; end: () => void }>()
  #release: (() => void) | undefined
  #closed = false

  private constructor(name: string, host: TabHost) {
    this.#name = name
    this.#host = host
    this.#bc = new BroadcastChannel(`pgwasm-tabs:${name}`)
    this.#bc.onmessage = (event) => this.#onMessage(event.data as TabMessage)
  }

  /**
   * Joins the tabs of `name`: leads at once when no worker does (after
   * `host.lead()`), else follows and waits in the lock's queue to lead later.
   */
  static async join(name: string, host: TabHost): Promise<TabGroup> {
    const group = new TabGroup(name, host)
    // Held for the life of this worker: the leader learns from it when this tab is gone.
    void LOCKS().request(`pgwasm-tab:${group.#tab}`, () => new Promise<void>(() => {}))
    const led = await new Promise<boolean>((resolve, reject) => {
      LOCKS()
        .request(`pgwasm-lead:${name}`, { ifAvailable: true }, async (lock) => {
          if (!lock) {
            resolve(false)
            return
          }
          try {
            await group.#becomeLeader(false)
          } catch (err) {
            reject(err)
            return
          }
          resolve(true)
          return group.#held()
        })
        .catch(reject)
    })
    if (!led) {
      group.#bc.postMessage({ kind: 'who' } satisfies TabMessage)
      void LOCKS().request(`pgwasm-lead:${name}`, async () => {
        if (group.#closed) return
        try {
          await group.#becomeLeader(true)
        } catch {
          // The database did not open here: let the next tab in the queue try.
          return
        }
        return group.#held()
      })
    }
    return group
  }

  get isLeader(): boolean {
    return this.#leading
  }

  /** Sends a request of this worker's page to the leader (this worker follows). */
  forward(request: Request): void {
    if (this.#epoch === undefined) {
      this.#queued.push(request)
      return
    }
    this.#pending.set(request.id, request)
    if (request.op === 'close') this.#closeId = request.id
    this.#bc.postMessage({ kind: 'request', from: this.#tab, epoch: this.#epoch, request } satisfies TabMessage)
  }

  /** Gives up leading (the page closed the database), so another tab can. */
  close(): void {
    this.#closed = true
    for (const follower of this.#followers.values()) follower.end()
    this.#followers.clear()
    this.#release?.()
    this.#bc.close()
  }

  /** Opens the database, then leads: announces itself and serves. `takeover`: another tab led before (the page hears of the move). */
  async #becomeLeader(takeover: boolean): Promise<void> {
    await this.#host.lead()
    const epoch = crypto.randomUUID()
    this.#leading = true
    this.#epoch = epoch
    this.#failPending()
    this.#bc.postMessage({ kind: 'leader', epoch } satisfies TabMessage)
    if (takeover) this.#host.leaderChanged(true)
    // Held back while no leader was known: never sent, so served here.
    for (const request of this.#queued.splice(0)) this.#host.serveOwn(request)
  }

  /** What the lock is held by: until this worker ends or {@link close}. */
  #held(): Promise<void> {
    return new Promise<void>((resolve) => (this.#release = resolve))
  }

  #onMessage(message: TabMessage): void {
    switch (message.kind) {
      case 'request':
        if (this.#leading && message.epoch === this.#epoch) this.#follower(message.from).deliver(message.request)
        return
      case 'reply':
        if (message.to !== this.#tab) return
        if ((message.reply.kind === 'ok' || message.reply.kind === 'error') && !this.#pending.delete(message.reply.id)) return
        this.#host.toPage(message.reply)
        if ((message.reply.kind === 'ok' || message.reply.kind === 'error') && message.reply.id === this.#closeId) this.close()
        return
      case 'leader':
        if (!this.#leading && message.epoch !== this.#epoch) this.#followLeader(message.epoch)
        return
      case 'who':
        if (this.#leading) this.#bc.postMessage({ kind: 'leader', epoch: this.#epoch! } satisfies TabMessage)
        return
    }
  }

  /** Another tab leads now: a first one, or one that took over from the tab this one followed. */
  #followLeader(epoch: string): void {
    const moved = this.#epoch !== undefined
    if (moved) this.#failPending()
    this.#epoch = epoch
    for (const request of this.#queued.splice(0)) this.forward(request)
    if (moved) this.#host.leaderChanged(false)
  }

  /** The requests the old leader never answered: it may or may not have run them. */
  #failPending(): void {
    for (const id of this.#pending.keys()) {
      const error = new EngineError('the tab that ran the database went away before answering; the call may or may not have taken effect (retry it if it is safe to)', {
        code: 'LEADER_CHANGED',
      })
      this.#host.toPage({ kind: 'error', id, error: encodeError(error) })
    }
    this.#pending.clear()
  }

  /** The channel a follower tab's requests arrive on, made on its first request. */
  #follower(tab: string): { deliver: (request: Request) => void } {
    let follower = this.#followers.get(tab)
    if (follower) return follower
    let onMessage: ((data: unknown) => void) | undefined
    const bc = this.#bc
    const channel: Channel = {
      post: (reply) => bc.postMessage({ kind: 'reply', to: tab, reply: reply as Reply } satisfies TabMessage),
      attach: (listener) => {
        onMessage = listener
        return () => {
          onMessage = undefined
        }
      },
      terminate: async () => {},
    }
    const stop = this.#host.serveFollower(channel)
    const entry = {
      deliver: (request: Request) => onMessage?.(request),
      end: stop,
    }
    this.#followers.set(tab, entry)
    // Granted once that tab's worker is gone: its open transactions roll back, its listens go.
    void LOCKS().request(`pgwasm-tab:${tab}`, () => {
      if (this.#followers.get(tab) === entry) {
        this.#followers.delete(tab)
        stop()
      }
    })
    return entry
  }
}
