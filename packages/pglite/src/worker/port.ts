/**
 * One message channel over the two shapes a worker comes in, so the client
 * and the host never ask which runtime they run in.
 */

/** A browser `Worker`, `DedicatedWorkerGlobalScope` or `MessagePort`: listeners get an event whose `data` is the message. */
export interface WebWorkerLike {
  postMessage(message: unknown, transfer: Transferable[]): void
  addEventListener(type: string, listener: (event: Event) => void): void
  removeEventListener(type: string, listener: (event: Event) => void): void
  /** A `MessagePort` delivers nothing to `addEventListener` until it is started. */
  start?(): void
  terminate?(): void
}

/** Node's `worker_threads` `Worker` or `parentPort`: listeners get the message itself. */
export interface NodeWorkerLike {
  postMessage(message: unknown, transferList?: readonly ArrayBuffer[]): void
  on(event: string, listener: (value: unknown) => void): unknown
  off(event: string, listener: (value: unknown) => void): unknown
  terminate?(): unknown
}

/** Either end of a worker's channel: what `new PGliteWorker(...)` and `worker({ port })` accept. */
export type WorkerLike = WebWorkerLike | NodeWorkerLike

/** Why the far side went away. */
export type Death = { readonly reason: 'error'; readonly error: unknown } | { readonly reason: 'exit'; readonly exitCode: number }

/** A worker's channel, whatever its runtime. */
export interface Channel {
  /** Throws what the runtime's `postMessage` throws (a `DataCloneError` for an uncloneable value). */
  post(message: unknown, transfer?: ArrayBuffer[]): void
  /**
   * Delivers messages (and, with `onDeath`, the worker's death) until the
   * returned function is called.
   */
  attach(onMessage: (data: unknown) => void, onDeath?: (death: Death) => void): () => void
  /** Ends the worker, when this end can (a `Worker`, not a worker's own scope). */
  terminate(): Promise<void>
}

const NO_TRANSFER: Transferable[] = []

function isNodeLike(target: WorkerLike): target is NodeWorkerLike {
  // Node's `parentPort` has both shapes; `on` hands over the data without an event wrapper.
  return typeof (target as Partial<NodeWorkerLike>).on === 'function'
}

/**
 * Wraps a worker (page side) or a worker's scope or port (worker side).
 * @throws {TypeError} when `target` has neither `on` nor `addEventListener`.
 */
export function openChannel(target: WorkerLike): Channel {
  if (isNodeLike(target)) return new NodeChannel(target)
  if (typeof target.addEventListener === 'function' && typeof target.postMessage === 'function') return new WebChannel(target)
  throw new TypeError('expected a `Worker`, a worker scope or a `worker_threads` port with `postMessage` and `on` or `addEventListener`')
}

class NodeChannel implements Channel {
  readonly #target: NodeWorkerLike
  constructor(target: NodeWorkerLike) {
    this.#target = target
  }

  post(message: unknown, transfer?: ArrayBuffer[]): void {
    this.#target.postMessage(message, transfer)
  }

  attach(onMessage: (data: unknown) => void, onDeath?: (death: Death) => void): () => void {
    const target = this.#target
    target.on('message', onMessage)
    if (!onDeath) return () => void target.off('message', onMessage)
    // Node ends the thread after an uncaught error: 'error' comes first, then 'exit'.
    const onError = (error: unknown): void => onDeath({ reason: 'error', error })
    const onExit = (exitCode: unknown): void => onDeath({ reason: 'exit', exitCode: Number(exitCode) })
    target.on('error', onError)
    target.on('exit', onExit)
    return () => {
      target.off('message', onMessage)
      target.off('error', onError)
      target.off('exit', onExit)
    }
  }

  async terminate(): Promise<void> {
    await this.#target.terminate?.()
  }
}

class WebChannel implements Channel {
  readonly #target: WebWorkerLike
  constructor(target: WebWorkerLike) {
    this.#target = target
  }

  post(message: unknown, transfer?: ArrayBuffer[]): void {
    this.#target.postMessage(message, transfer ?? NO_TRANSFER)
  }

  attach(onMessage: (data: unknown) => void, onDeath?: (death: Death) => void): () => void {
    const target = this.#target
    const onEvent = (event: Event): void => onMessage((event as MessageEvent).data)
    target.addEventListener('message', onEvent)
    target.start?.()
    if (!onDeath) return () => target.removeEventListener('message', onEvent)
    // A browser reports no event when a worker is terminated: only a script
    // that failed to load or threw is seen, as 'error' on the Worker.
    const onError = (event: Event): void => onDeath({ reason: 'error', error: (event as ErrorEvent).error ?? (event as ErrorEvent).message })
    target.addEventListener('error', onError)
    return () => {
      target.removeEventListener('message', onEvent)
      target.removeEventListener('error', onError)
    }
  }

  async terminate(): Promise<void> {
    this.#target.terminate?.()
  }
}
