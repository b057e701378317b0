/**
 * A shared-memory lane beside a worker's message channel. In Chromium here
 * a `postMessage` round trip costs 90-170 µs, more than an insert or a
 * select by key; a request written to a `SharedArrayBuffer` that wakes a
 * worker blocked in `Atomics.wait`, answered the same way to a page in
 * `Atomics.waitAsync`, costs ~40 µs.
 *
 * After each reply, when the page has nothing else in flight, the worker
 * waits in `Atomics.wait` for a few milliseconds ("lingers"). A call the
 * page makes meanwhile claims the lane and goes through shared memory;
 * otherwise, or when the worker has gone back to its event loop, it goes by
 * `postMessage`. A message the page sends while the worker lingers kicks it
 * back to its event loop. So calls are served in the order they were made,
 * and the worker's timers, IndexedDB callbacks and messages wait at most a
 * linger. Where shared memory is missing (a page without cross-origin
 * isolation, a runtime without `Atomics.waitAsync`), or a message does not
 * fit the lane's codec or size, everything goes by `postMessage`.
 */
import type { Channel, Death } from './port.js'
import { SharedWriter, Unencodable, decodeShared } from './shared-codec.js'

/** Key of the lane's own messages on the channel: `open` (page to worker, with the memory) and `ready`. */
const LANE_KEY = 'pgwasmSharedLane'

/** Int32 slots at the start of the shared memory. */
const STATE = 0
const REQUEST_SEQ = 1
const REQUEST_LENGTH = 2
const REPLY_SEQ = 3
const REPLY_LENGTH = 4
/** Requests the page sent (either way) and replies the worker sent: equal when nothing is in flight. */
const SENT = 5
const REPLIED = 6
const HEADER_BYTES = 32

/** The worker's state, moved by compare-and-swap from both sides. */
const IDLE = 0
const LINGERING = 1
const CLAIMED = 2
const SERVING = 3
const KICKED = 4

/** Room for one request or reply; larger ones go by `postMessage`. */
const DATA_BYTES = 1 << 20

/** A reply sent by `postMessage` instead (it did not encode, or a message went out before it). */
const BY_MESSAGE = -1

/** How long the worker waits for the page's next call after a reply: a page running queries back to back sends it within microseconds. */
const LINGER_MS = 10

/** Longest stretch the worker serves the lane without its event loop turning. */
const BURST_MS = 50

interface LaneMessage {
  readonly [LANE_KEY]: 'open' | 'ready'
  readonly memory?: SharedArrayBuffer
}

function laneMessage(data: unknown): LaneMessage | undefined {
  return typeof data === 'object' && data !== null && LANE_KEY in data ? (data as LaneMessage) : undefined
}

function isRequest(data: unknown): data is { op: string; id: number } {
  return typeof data === 'object' && data !== null && typeof (data as { op?: unknown }).op === 'string' && typeof (data as { id?: unknown }).id === 'number'
}

function replyId(data: unknown): number | undefined {
  if (typeof data !== 'object' || data === null) return undefined
  const { kind, id } = data as { kind?: unknown; id?: unknown }
  return (kind === 'ok' || kind === 'error') && typeof id === 'number' ? id : undefined
}

type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
) => { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> }

/** `Atomics.waitAsync` (ES2024; the library target here is older). */
const waitAsync = (Atomics as unknown as { waitAsync?: WaitAsync }).waitAsync?.bind(Atomics)

/** Requests that never take the lane: the first (nothing is set up yet) and the ones that end or dump everything. */
const MESSAGE_ONLY_OPS = new Set(['init', 'close', 'dumpDataDir'])

/**
 * `init` is not counted in flight: the page sends it again when the worker
 * says hello (the first may be lost), and the worker answers each copy.
 */
const UNCOUNTED_OP = 'init'

/**
 * The page's end: offers the worker a lane (where this page may share
 * memory) and sends calls through it while the worker lingers.
 */
export function withPageLane(inner: Channel): Channel {
  const scope = globalThis as { crossOriginIsolated?: boolean }
  if (typeof SharedArrayBuffer !== 'function' || waitAsync === undefined || scope.crossOriginIsolated === false) return inner
  let memory: SharedArrayBuffer
  try {
    memory = new SharedArrayBuffer(HEADER_BYTES + DATA_BYTES)
    inner.post({ [LANE_KEY]: 'open', memory } satisfies LaneMessage)
  } catch {
    return inner
  }
  return new PageLane(inner, memory)
}

export class PageLane implements Channel {
  readonly #inner: Channel
  readonly #control: Int32Array
  readonly #data: Uint8Array
  readonly #writer: SharedWriter
  #ready = false
  #closed = false
  #inFlight = 0
  #seq = 0
  #outstandingInit: number | undefined
  #deliver: ((data: unknown) => void) | undefined

  constructor(inner: Channel, memory: SharedArrayBuffer) {
    this.#inner = inner
    this.#control = new Int32Array(memory, 0, HEADER_BYTES / 4)
    this.#data = new Uint8Array(memory, HEADER_BYTES)
    this.#writer = new SharedWriter(this.#data)
  }

  /** Calls sent through shared memory and by message (for tests and diagnostics). */
  readonly counts = { shared: 0, message: 0 }

  /** Whether the worker accepted the lane. */
  get ready(): boolean {
    return this.#ready && !this.#closed
  }

  post(message: unknown, transfer?: ArrayBuffer[]): void {
    const asked = isRequest(message) ? message : undefined
    if (asked?.op === UNCOUNTED_OP) this.#outstandingInit = asked.id
    const request = asked !== undefined && asked.op !== UNCOUNTED_OP
    if (request) {
      this.#inFlight++
      Atomics.add(this.#control, SENT, 1)
      if (this.#ready && this.#inFlight === 1 && !MESSAGE_ONLY_OPS.has(asked.op) && this.#sendShared(message)) {
        this.counts.shared++
        return
      }
      this.counts.message++
    }
    try {
      this.#inner.post(message, transfer)
    } catch (err) {
      if (request) {
        this.#inFlight--
        Atomics.sub(this.#control, SENT, 1)
      }
      throw err
    }
    // A lingering worker must go back to its event loop to read this.
    if (Atomics.compareExchange(this.#control, STATE, LINGERING, KICKED) === LINGERING) Atomics.notify(this.#control, STATE)
  }

  attach(onMessage: (data: unknown) => void, onDeath?: (death: Death) => void): () => void {
    this.#deliver = onMessage
    const detach = this.#inner.attach((data) => {
      const lane = laneMessage(data)
      if (lane) {
        if (lane[LANE_KEY] === 'ready') this.#ready = true
        return
      }
      const id = replyId(data)
      if (id !== undefined && this.#outstandingInit !== id) this.#inFlight--
      // A worker that was not listening yet lost the offer too.
      if ((data as { kind?: unknown } | null)?.kind === 'hello' && !this.#ready) this.#inner.post({ [LANE_KEY]: 'open', memory: this.#control.buffer as SharedArrayBuffer } satisfies LaneMessage)
      onMessage(data)
    }, onDeath)
    return () => {
      this.#close()
      detach()
    }
  }

  terminate(): Promise<void> {
    this.#close()
    return this.#inner.terminate()
  }

  #close(): void {
    this.#closed = true
    // Ends a wait for a reply that will not come.
    Atomics.notify(this.#control, REPLY_SEQ)
  }

  /** Writes the request and claims a lingering worker; false (nothing sent) when it is not lingering. */
  #sendShared(message: unknown): boolean {
    const control = this.#control
    if (Atomics.load(control, STATE) !== LINGERING) return false
    let length: number
    try {
      length = this.#writer.encode(message)
    } catch (err) {
      if (err instanceof Unencodable) return false
      throw err
    }
    const seq = (this.#seq + 1) | 0
    Atomics.store(control, REQUEST_LENGTH, length)
    Atomics.store(control, REQUEST_SEQ, seq)
    if (Atomics.compareExchange(control, STATE, LINGERING, CLAIMED) !== LINGERING) return false
    this.#seq = seq
    Atomics.notify(control, STATE)
    void this.#awaitReply(seq)
    return true
  }

  async #awaitReply(seq: number): Promise<void> {
    const control = this.#control
    for (;;) {
      if (this.#closed) return
      const current = Atomics.load(control, REPLY_SEQ)
      const ahead = (current - seq) | 0
      if (ahead === 0) break
      // Past it: its reply came by message, was delivered, and a later call already went out.
      if (ahead > 0) return
      const wait = waitAsync!(control, REPLY_SEQ, current)
      if (wait.async) await wait.value
    }
    const length = Atomics.load(control, REPLY_LENGTH)
    // BY_MESSAGE: the reply is on its way through the channel.
    if (length === BY_MESSAGE) return
    const reply = decodeShared(this.#data.slice(0, length))
    this.#inFlight--
    this.#deliver?.(reply)
  }
}

/**
 * The worker's end: accepts a lane when this thread may block (a worker,
 * not a page's main thread) and serves the calls that come through it.
 */
export function withWorkerLane(inner: Channel, mayBlock: boolean): Channel {
  if (!mayBlock || typeof SharedArrayBuffer !== 'function') return inner
  return new WorkerLane(inner)
}

class WorkerLane implements Channel {
  readonly #inner: Channel
  #control: Int32Array | undefined
  #data: Uint8Array | undefined
  #writer: SharedWriter | undefined
  #deliver: ((data: unknown) => void) | undefined
  #detached = false
  /** The lane's call being served, if any. */
  #serving: { id: number; seq: number } | undefined
  /** A message went out while serving: the reply must follow it through the channel, not overtake it. */
  #postedWhileServing = false
  /** When the event loop last handed us a message: lingering stops BURST_MS later. */
  #burstStart = 0
  /** Set when `Atomics.wait` threw (a scope that may not block): calls then go by message. */
  #cannotBlock = false
  /** Ids of `init` requests: their replies are not counted (see UNCOUNTED_OP). */
  readonly #initIds = new Set<number>()

  constructor(inner: Channel) {
    this.#inner = inner
  }

  post(message: unknown, transfer?: ArrayBuffer[]): void {
    const control = this.#control
    const id = replyId(message)
    const serving = this.#serving
    if (!control || !serving || id !== serving.id) {
      if (serving) this.#postedWhileServing = true
      this.#inner.post(message, transfer)
      // A reply by message to a counted call: the page may have nothing left in flight.
      if (control && id !== undefined && !this.#initIds.has(id)) {
        Atomics.add(control, REPLIED, 1)
        if (!serving) this.#announceLinger(control)
      }
      return
    }
    let length = BY_MESSAGE
    if (!this.#postedWhileServing) {
      try {
        length = this.#writer!.encode(message)
      } catch (err) {
        if (!(err instanceof Unencodable)) throw err
      }
    }
    // When this throws (a value that does not clone) the host replies again with an error, still for this call.
    if (length === BY_MESSAGE) this.#inner.post(message, transfer)
    this.#serving = undefined
    Atomics.add(control, REPLIED, 1)
    Atomics.store(control, REPLY_LENGTH, length)
    Atomics.store(control, REPLY_SEQ, serving.seq)
    // Announced before the page can see the reply: its next call, made
    // within microseconds, finds the lane open even before we wait on it.
    this.#announceLinger(control)
    Atomics.notify(control, REPLY_SEQ)
  }

  #announceLinger(control: Int32Array): void {
    if (this.#detached || this.#cannotBlock || performance.now() - this.#burstStart >= BURST_MS) {
      Atomics.store(control, STATE, IDLE)
      return
    }
    Atomics.store(control, STATE, LINGERING)
    queueMicrotask(this.#linger)
  }

  attach(onMessage: (data: unknown) => void, onDeath?: (death: Death) => void): () => void {
    this.#deliver = onMessage
    const detach = this.#inner.attach((data) => {
      const lane = laneMessage(data)
      if (lane) {
        if (lane[LANE_KEY] === 'open' && lane.memory instanceof SharedArrayBuffer) this.#open(lane.memory)
        return
      }
      this.#burstStart = performance.now()
      if (isRequest(data) && data.op === UNCOUNTED_OP) this.#initIds.add(data.id)
      onMessage(data)
    }, onDeath)
    return () => {
      this.#detached = true
      detach()
    }
  }

  terminate(): Promise<void> {
    return this.#inner.terminate()
  }

  #open(memory: SharedArrayBuffer): void {
    if (this.#control || memory.byteLength <= HEADER_BYTES) return
    this.#control = new Int32Array(memory, 0, HEADER_BYTES / 4)
    this.#data = new Uint8Array(memory, HEADER_BYTES)
    this.#writer = new SharedWriter(this.#data)
    this.#inner.post({ [LANE_KEY]: 'ready' } satisfies LaneMessage)
  }

  /**
   * After a reply: waits briefly in `Atomics.wait` for the page to claim the
   * lane, unless a call is in flight by message (it is in the event loop).
   */
  readonly #linger = (): void => {
    const control = this.#control!
    const state = Atomics.load(control, STATE)
    if (state === IDLE || state === SERVING) return
    // Checked after announcing: a message the page sends from then on kicks us.
    if (this.#detached || state !== LINGERING || Atomics.load(control, SENT) !== Atomics.load(control, REPLIED)) {
      this.#stopLingering()
      return
    }
    const deadline = Math.min(performance.now() + LINGER_MS, this.#burstStart + BURST_MS)
    // Until claimed or kicked (the state moves), the deadline, or a scope that may not block.
    for (;;) {
      const left = deadline - performance.now()
      if (left <= 0 || !this.#wait(control, left) || Atomics.load(control, STATE) !== LINGERING) break
    }
    this.#stopLingering()
  }

  /** `Atomics.wait`; false (and no lingering from then on) where this thread may not block after all. */
  #wait(control: Int32Array, ms: number): boolean {
    try {
      Atomics.wait(control, STATE, LINGERING, ms)
      return true
    } catch {
      this.#cannotBlock = true
      return false
    }
  }

  /** Back to the event loop, unless the page claimed the lane in the meantime (then serves the claim). */
  #stopLingering(): void {
    const control = this.#control!
    const state = Atomics.compareExchange(control, STATE, LINGERING, IDLE)
    if (state === CLAIMED && !this.#detached) this.#take()
    else if (state === KICKED || state === CLAIMED) Atomics.store(control, STATE, IDLE)
  }

  #take(): void {
    const control = this.#control!
    Atomics.store(control, STATE, SERVING)
    const seq = Atomics.load(control, REQUEST_SEQ)
    const request = decodeShared(this.#data!.slice(0, Atomics.load(control, REQUEST_LENGTH)))
    this.#serving = { id: (request as { id: number }).id, seq }
    this.#postedWhileServing = false
    this.#deliver?.(request)
  }
}
