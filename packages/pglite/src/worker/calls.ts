import type { Notice } from '../query/results.js'
import { decodeError } from './error-codec.js'
import type { Channel } from './port.js'
import type { OpValues, Reply, Request } from './protocol.js'

interface PendingCall {
  resolve(value: unknown): void
  reject(error: unknown): void
  onNotice: ((notice: Notice) => void) | undefined
}

/** The page's calls in flight: one promise per request id, settled by the worker's reply to that id. */
export class PendingCalls {
  readonly #channel: Channel
  readonly #pending = new Map<number, PendingCall>()
  #lastId = 0

  constructor(channel: Channel) {
    this.#channel = channel
  }

  nextId(): number {
    return ++this.#lastId
  }

  /**
   * Posts `request` and resolves with the value of its reply.
   * @throws {TypeError} (as a rejection) when the request does not clone, e.g. a function among the parameters.
   */
  send<R extends Request>(request: R, onNotice: ((notice: Notice) => void) | undefined, transfer: ArrayBuffer[] | undefined): Promise<OpValues[R['op']]> {
    return new Promise((resolve, reject) => {
      this.#pending.set(request.id, { resolve: resolve as (value: unknown) => void, reject, onNotice })
      try {
        this.#channel.post(request, transfer)
      } catch (err) {
        this.#pending.delete(request.id)
        const reason = err instanceof Error ? err.message : String(err)
        reject(new TypeError(`the arguments of \`${request.op}\` cannot be sent to the worker: ${reason}`, { cause: err }))
      }
    })
  }

  /** Settles the call `reply` answers; a second reply to the same id (a re-sent `init`) is ignored. */
  settle(reply: Extract<Reply, { kind: 'ok' | 'error' }>): void {
    const call = this.#pending.get(reply.id)
    if (!call) return
    this.#pending.delete(reply.id)
    if (reply.notices && call.onNotice) {
      try {
        for (const notice of reply.notices) call.onNotice(notice)
      } catch (err) {
        call.reject(err)
        return
      }
    }
    if (reply.kind === 'ok') call.resolve(reply.value)
    else call.reject(decodeError(reply.error))
  }

  /** Rejects every call in flight with `error` (the worker died). */
  rejectAll(error: Error): void {
    const calls = [...this.#pending.values()]
    this.#pending.clear()
    for (const call of calls) call.reject(error)
  }
}
