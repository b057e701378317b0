/** Addresses remembered at most; the oldest is forgotten first. */
const MAX_ADDRESSES = 10_000
/** An address with no failed attempt for this long starts afresh. */
const FORGET_AFTER_MS = 600_000

interface Failures {
  count: number
  /** When the next attempt from the address may be checked (performance.now() ms). */
  nextAt: number
}

/**
 * Spaces out password checks from an address that failed one: after its
 * n-th failure in a row, each further attempt waits `baseDelayMs * 2^(n-1)`
 * (at most `maxDelayMs`) after the one before it, parallel connections
 * included. A success forgets the address. Addresses that never failed
 * wait for nothing.
 */
export class AuthThrottle {
  readonly #entries = new Map<string, Failures>()
  readonly #baseDelayMs: number
  readonly #maxDelayMs: number
  readonly #now: () => number

  constructor(baseDelayMs = 100, maxDelayMs = 5_000, now: () => number = () => performance.now()) {
    this.#baseDelayMs = baseDelayMs
    this.#maxDelayMs = maxDelayMs
    this.#now = now
  }

  /** How long (ms) an attempt from `address` must wait before it is checked; reserves its turn. */
  delayFor(address: string): number {
    const entry = this.#live(address)
    if (!entry) return 0
    const now = this.#now()
    const at = Math.max(now, entry.nextAt)
    entry.nextAt = at + this.#delay(entry.count)
    return at - now
  }

  failed(address: string): void {
    const now = this.#now()
    let entry = this.#live(address)
    if (!entry) {
      if (this.#entries.size >= MAX_ADDRESSES) this.#entries.delete(this.#entries.keys().next().value!)
      entry = { count: 0, nextAt: now }
      this.#entries.set(address, entry)
    }
    entry.count++
    entry.nextAt = Math.max(entry.nextAt, now + this.#delay(entry.count))
  }

  /** Whether any address has a failed attempt it has not outlived (stale ones are forgotten on the way). */
  get holdsFailures(): boolean {
    for (const address of this.#entries.keys()) if (this.#live(address)) return true
    return false
  }

  succeeded(address: string): void {
    this.#entries.delete(address)
  }

  #live(address: string): Failures | undefined {
    const entry = this.#entries.get(address)
    if (entry && this.#now() - entry.nextAt > FORGET_AFTER_MS) {
      this.#entries.delete(address)
      return undefined
    }
    return entry
  }

  #delay(failures: number): number {
    return Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** Math.max(0, failures - 1))
  }
}
