/**
 * Raw protocol calls (`execProtocol*` and a lease's exec): frontend input
 * checked before the engine sees it, the backend's output decoded, kept or
 * streamed.
 */
import type { Backend } from '../engine/backend/backend.js'
import type { ExecProtocolOptions, ExecProtocolResult } from '../exec-protocol-types.js'
import type { NotifyRegistry } from '../notify.js'
import { FRONTEND_TYPES, Frontend } from '../engine/wire/message-codes.js'
import { validateFrontendFrames, validateStartupPacket } from '../protocol/frames.js'
import { ParsedHandler, RawAccumulator, RawHandler, RawNotifyHandler, type ProtocolHandler } from '../protocol/handlers.js'
import { MessageSink, type BackendMessage } from '../protocol/message-sink.js'
import type { Notification } from '../protocol/messages.js'
import type { QueryRunner } from '../query/runner.js'

export type InputKind = 'terminate' | 'startup' | 'frames'

export class ProtocolExec {
  readonly #notify: NotifyRegistry
  /** The instance's query runner of the moment (a new engine gets a new one). */
  readonly #runner: () => QueryRunner | undefined
  // Made once; re-armed per exec (no per-exec closures on the hot path).
  readonly #messageSink = new MessageSink()
  readonly #messageHandler = new ParsedHandler(this.#messageSink)
  readonly #raw = new RawHandler()
  readonly #rawNotify = new RawNotifyHandler()
  readonly #accumulator = new RawAccumulator()

  constructor(notify: NotifyRegistry, runner: () => QueryRunner | undefined) {
    this.#notify = notify
    this.#runner = runner
  }

  /** Bytes the decoders hold for a message still arriving. */
  get assemblyBytes(): number {
    return Math.max(this.#rawNotify.assemblyBytes, this.#messageHandler.assemblyBytes)
  }

  get rawBufferBytes(): number {
    return this.#accumulator.capacityBytes
  }

  /**
   * Validates raw input before the engine sees it and says what it is. Also
   * remembers whether it left an extended-protocol sequence without its Sync:
   * Postgres would skip the next query's messages up to a Sync, so the next
   * parsed call sends one first.
   */
  checkInput(message: Uint8Array): InputKind {
    if (isTerminate(message)) return 'terminate'
    if (message.length > 0 && message[0] === 0) {
      validateStartupPacket(message)
      return 'startup'
    }
    const unsynced = validateFrontendFrames(message, FRONTEND_TYPES)
    const runner = this.#runner()
    if (runner) runner.pendingSync = unsynced
    return 'frames'
  }

  /** `execProtocol`: every backend message decoded (pg-protocol's classes) with the raw bytes. */
  execProtocol(backend: Backend, message: Uint8Array, options: ExecProtocolOptions): ExecProtocolResult {
    const messages = this.execMessages(backend, message, options, true)
    return { messages, data: this.#accumulator.take() }
  }

  execMessages(backend: Backend, message: Uint8Array, options: ExecProtocolOptions, keepRaw: boolean): BackendMessage[] {
    const kind = this.checkInput(message)
    if (kind === 'terminate') return []
    const sink = this.#messageSink.reset()
    const handler: ProtocolHandler = keepRaw
      ? {
          onChunk: (bytes) => {
            this.#accumulator.push(bytes)
            this.#messageHandler.onChunk(bytes)
          },
          finish: () => this.#messageHandler.finish(),
        }
      : this.#messageHandler
    runRequest(backend, message, handler, kind)
    handler.finish()
    const failure = this.#messageHandler.takeFailure()
    if (failure !== undefined) {
      sink.reset()
      if (keepRaw) this.#accumulator.take()
      throw failure
    }
    const { messages, error, notices, notifications } = sink
    sink.reset()
    if (notices && options.onNotice) for (const n of notices) options.onNotice(n)
    if (notifications) this.#notify.dispatch(notifications)
    if (error && options.throwOnError !== false) {
      if (keepRaw) this.#accumulator.take()
      throw error
    }
    return messages
  }

  /** `execProtocolRaw`: the backend's bytes untouched. */
  execRaw(backend: Backend, message: Uint8Array): Uint8Array {
    const kind = this.checkInput(message)
    if (kind === 'terminate') return new Uint8Array(0)
    this.runRaw(backend, message, this.#accumulator.push, kind)
    return this.#accumulator.take()
  }

  /** `execProtocolRawStream`: the backend's bytes to `onRawData` as the engine writes them. */
  execRawStream(backend: Backend, message: Uint8Array, onRawData: (bytes: Uint8Array) => void): void {
    const kind = this.checkInput(message)
    if (kind === 'terminate') return
    this.runRaw(backend, message, onRawData, kind)
  }

  runRaw(backend: Backend, message: Uint8Array, onData: (bytes: Uint8Array) => void, kind: 'startup' | 'frames'): void {
    // A callback that throws while the engine writes would end the engine:
    // its error is kept for the caller, the rest of the output skipped.
    let failed = false
    let failure: unknown
    const guarded = (bytes: Uint8Array): void => {
      if (failed) return
      try {
        onData(bytes)
      } catch (err) {
        failed = true
        failure = err
      }
    }
    try {
      this.#runRawUnchecked(backend, message, guarded, kind)
      if (failed) throw failure
    } finally {
      // Output that did not end in ReadyForQuery leaves the backend skipping
      // to a Sync (e.g. an error in a sequence whose Sync was eaten): the
      // next parsed call sends one first.
      const runner = this.#runner()
      if (kind === 'frames' && runner && !backend.deadError && backend.lastReadyStatus === 0) runner.pendingSync = true
    }
  }

  #runRawUnchecked(backend: Backend, message: Uint8Array, onData: (bytes: Uint8Array) => void, kind: 'startup' | 'frames'): void {
    if (this.#notify.hasListeners) {
      const handler = this.#rawNotify.arm(onData)
      try {
        runRequest(backend, message, handler, kind)
      } finally {
        const notifications: Notification[] | undefined = handler.notifications
        handler.finish()
        if (notifications) this.#notify.dispatch(notifications)
      }
    } else {
      const handler = this.#raw.arm(onData)
      try {
        runRequest(backend, message, handler, kind)
      } finally {
        handler.finish()
      }
    }
  }
}

/** Runs a request or, for a startup packet (first byte 0), the connection handshake. */
function runRequest(backend: Backend, message: Uint8Array, handler: ProtocolHandler, kind: 'startup' | 'frames'): void {
  if (kind === 'startup') backend.startup(message, handler)
  else backend.exec(message, handler)
}

function isTerminate(message: Uint8Array): boolean {
  return message.length === 5 && message[0] === Frontend.Terminate
}
