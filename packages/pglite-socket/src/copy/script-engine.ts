import type { EngineLease } from '@pgwasm/pglite'
import type { ScriptEngine, StepResult } from './copy-script.js'
import type { OutputSplitter } from '../wire/output.js'
import { concat } from '../wire/wire.js'

/** The engine for one step of a COPY script: the session's lease, output filter and transport. */
export class LeaseScriptEngine implements ScriptEngine {
  readonly #lease: EngineLease
  readonly #splitter: OutputSplitter
  readonly #onOutput: (bytes: Uint8Array) => void
  readonly #send: (bytes: Uint8Array) => void
  #status: number

  /**
   * `onOutput` takes engine output into `splitter` (flushing it as it grows);
   * `send` writes what the splitter holds, then its bytes, to the client.
   */
  constructor(
    lease: EngineLease,
    splitter: OutputSplitter,
    onOutput: (bytes: Uint8Array) => void,
    send: (bytes: Uint8Array) => void,
    status: number,
  ) {
    this.#lease = lease
    this.#splitter = splitter
    this.#onOutput = onOutput
    this.#send = send
    this.#status = status
  }

  forward(message: Uint8Array, dropCopyIn: boolean, holdLastComplete: boolean, copyIn?: () => Uint8Array | undefined): StepResult {
    const splitter = this.#splitter
    splitter.lastStatus = 0
    splitter.errorSeen = false
    splitter.dropReady = true
    splitter.dropCopyIn = dropCopyIn
    splitter.holdComplete = holdLastComplete
    if (copyIn) this.#lease.copyInFrom(copyIn)
    try {
      this.#lease.execProtocolRawStream(message, this.#onOutput)
    } finally {
      if (copyIn) this.#lease.copyInFrom(undefined)
      splitter.dropReady = false
      splitter.dropCopyIn = false
      splitter.holdComplete = false
    }
    if (splitter.lastStatus !== 0) this.#status = splitter.lastStatus
    return { failed: splitter.errorSeen, status: this.#status }
  }

  settleHeld(send: boolean): void {
    this.#splitter.settleHeld(send)
  }

  collect(message: Uint8Array): Uint8Array {
    const chunks: Uint8Array[] = []
    // Copied: the engine may reuse the memory behind a chunk once the callback returns.
    this.#lease.execProtocolRawStream(message, (bytes) => chunks.push(bytes.slice()))
    return concat(chunks)
  }

  write(bytes: Uint8Array): void {
    this.#send(bytes)
  }
}
