import type { OutputSplitter } from '../wire/output.js'
import type { CacheGate } from './cache-gate.js'
import type { Transport } from './session-host.js'

/** Engine output waiting in the splitter is sent once it grows past this. */
const FLUSH_BYTES = 262_144

/**
 * What one client is sent: the engine's output, through the statement
 * cache's gate and the client's OutputSplitter, and the server's own
 * messages after the engine output before them.
 */
export class ClientOutput {
  readonly #splitter: OutputSplitter
  readonly #gate: CacheGate
  readonly #transport: Pick<Transport, 'write'>
  readonly #isClosed: () => boolean

  constructor(splitter: OutputSplitter, gate: CacheGate, transport: Pick<Transport, 'write'>, isClosed: () => boolean) {
    this.#splitter = splitter
    this.#gate = gate
    this.#transport = transport
    this.#isClosed = isClosed
  }

  /** Engine output for the client: filtered, and sent in pieces when it grows large. */
  readonly fromEngine = (bytes: Uint8Array): void => {
    if (this.#gate.active && !this.#gate.pass(bytes)) return
    this.#splitter.push(bytes)
    if (this.#splitter.pendingBytes > FLUSH_BYTES) this.flush()
  }

  /** Bytes of our own for the client, after the engine output before them. */
  readonly send = (bytes: Uint8Array): void => {
    this.flush()
    if (!this.#isClosed()) this.#transport.write(bytes)
  }

  /** Sends the engine output the splitter holds. */
  flush(): void {
    const out = this.#splitter.take()
    if (out && !this.#isClosed()) this.#transport.write(out)
  }
}
