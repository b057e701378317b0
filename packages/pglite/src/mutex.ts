/**
 * The `Mutex` PGlite exports (async-mutex's API): one holder at a time,
 * waiters served first come, first served.
 */

/** Releases a lock taken with {@link Mutex.acquire}; calling it again does nothing. */
export type MutexReleaser = () => void

interface Waiter {
  resolve(release: MutexReleaser): void
  reject(error: Error): void
}

/** An async lock: `runExclusive(fn)` runs `fn` once every earlier holder is done. */
export class Mutex {
  readonly #cancelError: Error
  #locked = false
  // A FIFO with a head index: dequeue is O(1) and a served slot is cleared.
  #waiters: (Waiter | undefined)[] = []
  #head = 0
  #unlockWaiters: (() => void)[] = []

  /** @param cancelError what {@link cancel} rejects pending `acquire()` calls with. */
  constructor(cancelError: Error = new Error('request for lock canceled')) {
    this.#cancelError = cancelError
  }

  /** Resolves with a releaser once the lock is this caller's. */
  acquire(): Promise<MutexReleaser> {
    if (!this.#locked) {
      this.#locked = true
      return Promise.resolve(this.#releaser())
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }))
  }

  /** Runs `callback` holding the lock and releases it however `callback` ends. */
  async runExclusive<T>(callback: () => Promise<T> | T): Promise<T> {
    const release = await this.acquire()
    try {
      return await callback()
    } finally {
      release()
    }
  }

  isLocked(): boolean {
    return this.#locked
  }

  /** Resolves when the lock is free (at once if it is), without taking it. */
  waitForUnlock(): Promise<void> {
    if (!this.#locked) return Promise.resolve()
    return new Promise((resolve) => this.#unlockWaiters.push(resolve))
  }

  /** Releases the lock whoever holds it; the next waiter gets it. */
  release(): void {
    const next = this.#waiters[this.#head]
    if (next) {
      this.#waiters[this.#head++] = undefined
      if (this.#head === this.#waiters.length) {
        this.#waiters = []
        this.#head = 0
      }
      next.resolve(this.#releaser())
      return
    }
    this.#locked = false
    const unlockWaiters = this.#unlockWaiters
    this.#unlockWaiters = []
    for (const resolve of unlockWaiters) resolve()
  }

  /** Rejects every pending `acquire()` with the cancel error; the current holder keeps the lock. */
  cancel(): void {
    const waiters = this.#waiters
    const head = this.#head
    this.#waiters = []
    this.#head = 0
    for (let i = head; i < waiters.length; i++) waiters[i]?.reject(this.#cancelError)
  }

  #releaser(): MutexReleaser {
    let released = false
    return () => {
      if (released) return
      released = true
      this.release()
    }
  }
}
