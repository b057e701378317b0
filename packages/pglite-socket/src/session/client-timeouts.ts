import type { SessionTimeouts } from '@pgwasm/pglite'

/** The FATAL error PostgreSQL sends when it ends a session for each of these timeouts. */
export const TIMEOUT_ERRORS = {
  idleInTransaction: { code: '25P03', message: 'terminating connection due to idle-in-transaction timeout' },
  transaction: { code: '25P04', message: 'terminating connection due to transaction timeout' },
  idleSession: { code: '57P05', message: 'terminating connection due to idle-session timeout' },
} as const

export type TimeoutKind = keyof typeof TIMEOUT_ERRORS

/**
 * One client's session-ending timeouts, which the engine no longer acts on
 * (it would end the one backend every client shares): the server ends only
 * the client whose time ran out. Settings are read from the engine while
 * that client holds it, so a `SET LOCAL` inside its transaction is its own.
 *
 * `idle_in_transaction_session_timeout` and `idle_session_timeout` run while
 * the client sends nothing; `transaction_timeout` runs from the request that
 * opened its transaction block to the one that ends it.
 */
export class ClientTimeouts {
  readonly #expire: (kind: TimeoutKind) => void
  readonly #defaultIdleInTransactionMs: number
  /**
   * The idle timer is lazy: it is armed once and, when it fires, checks
   * whether the client has been idle long enough, re-arming for the rest if
   * not. Going idle and busy again per request then costs a clock read and
   * a few writes, not a timer each.
   */
  #idle: ReturnType<typeof setTimeout> | undefined
  #idleDueAt = 0
  #isIdle = false
  #idleSince = 0
  #idleMs = 0
  #idleKind: TimeoutKind = 'idleSession'
  #transaction: ReturnType<typeof setTimeout> | undefined
  #transactionStartedAt = 0
  #transactionMs = 0
  #idleInTransactionMs = 0

  /**
   * @param defaultIdleInTransactionMs applies where the engine's setting is 0 (0: none).
   * @param expire ends the client with the error of `kind`.
   */
  constructor(defaultIdleInTransactionMs: number, expire: (kind: TimeoutKind) => void) {
    this.#defaultIdleInTransactionMs = defaultIdleInTransactionMs
    this.#expire = expire
  }

  /**
   * After a request that left the client in a transaction block, with the
   * engine's settings now. `requestStartedAt` is when that request was
   * given the engine: a block it began is counted from then, no later than
   * the engine counts it, so a statement the engine stops at the deadline is
   * always seen here as run out (else the rolled-back `SET LOCAL` of the
   * aborted block would clear the timer and the client would never be ended).
   */
  inTransaction(settings: SessionTimeouts, began: boolean, requestStartedAt: number): void {
    const idle = settings.idleInTransactionSessionTimeout
    this.#idleInTransactionMs = idle > 0 ? idle : this.#defaultIdleInTransactionMs
    if (began) this.#transactionStartedAt = requestStartedAt
    const ms = settings.transactionTimeout
    if (ms === this.#transactionMs && !began) return
    this.#clearTransaction()
    this.#transactionMs = ms
    if (ms <= 0) return
    const left = Math.max(0, this.#transactionStartedAt + ms - performance.now())
    this.#transaction = setTimeout(() => {
      this.#transaction = undefined
      this.#expire('transaction')
    }, left)
    this.#transaction.unref?.()
  }

  /**
   * Whether the client's transaction has outlived its transaction_timeout
   * by `graceMs`: a statement still running then is stopped, and the client
   * ended once it has (no timer fires while the engine runs).
   */
  transactionExpired(graceMs = 0): boolean {
    return this.#transactionMs > 0 && performance.now() >= this.#transactionStartedAt + this.#transactionMs + graceMs
  }

  /** After a request that ended the client's transaction block. */
  outOfTransaction(): void {
    this.#clearTransaction()
    this.#transactionMs = 0
    this.#idleInTransactionMs = 0
  }

  /** The client waits for its next message; `idleSessionMs` applies outside a transaction. */
  idle(inTransaction: boolean, idleSessionMs: number): void {
    const ms = inTransaction ? this.#idleInTransactionMs : idleSessionMs
    this.#isIdle = ms > 0
    if (ms <= 0) return
    const now = performance.now()
    this.#idleSince = now
    this.#idleMs = ms
    this.#idleKind = inTransaction ? 'idleInTransaction' : 'idleSession'
    // A timer due later than this idle period ends is too late: arm anew.
    if (this.#idle !== undefined && this.#idleDueAt > now + ms) this.#clearIdle()
    if (this.#idle === undefined) this.#armIdle(ms)
  }

  /** The client sent something: it is not idle. */
  busy(): void {
    this.#isIdle = false
  }

  /** The client is gone. */
  stop(): void {
    this.#isIdle = false
    this.#clearIdle()
    this.#clearTransaction()
  }

  #armIdle(ms: number): void {
    this.#idleDueAt = performance.now() + ms
    this.#idle = setTimeout(this.#idleFired, ms)
    this.#idle.unref?.()
  }

  readonly #idleFired = (): void => {
    this.#idle = undefined
    if (!this.#isIdle) return
    const left = this.#idleSince + this.#idleMs - performance.now()
    if (left >= 1) this.#armIdle(left)
    else this.#expire(this.#idleKind)
  }

  #clearIdle(): void {
    if (this.#idle === undefined) return
    clearTimeout(this.#idle)
    this.#idle = undefined
  }

  #clearTransaction(): void {
    if (this.#transaction === undefined) return
    clearTimeout(this.#transaction)
    this.#transaction = undefined
  }
}
