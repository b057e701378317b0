/**
 * A FIFO of jobs on one engine: a job runs only when every earlier one has
 * settled. An array with a head index, so dequeue is O(1) and nothing keeps
 * old waiters alive.
 */
export class ExecQueue {
  #waiters: ((value?: undefined) => void)[] = []
  #head = 0
  #busy = false
  /** Called when a job starts to wait behind the running one (see `EngineLease.whenOthersWait`). */
  onWaiter: (() => void) | undefined

  async run<T>(job: () => Promise<T> | T): Promise<T> {
    if (this.#busy) {
      const turn = new Promise<undefined>((resolve) => this.#waiters.push(resolve))
      this.onWaiter?.()
      await turn
    } else this.#busy = true
    try {
      return await job()
    } finally {
      this.#next()
    }
  }

  /** True when a job is waiting for its turn. */
  get hasWaiters(): boolean {
    return this.#head < this.#waiters.length
  }

  /** True when no job runs or waits. */
  get isIdle(): boolean {
    return !this.#busy
  }

  #next(): void {
    if (this.#head < this.#waiters.length) {
      const wake = this.#waiters[this.#head]!
      this.#waiters[this.#head++] = undefined as never
      if (this.#head === this.#waiters.length) {
        this.#waiters = []
        this.#head = 0
      }
      // The lock passes straight to the next job: #busy stays true.
      wake()
    } else {
      this.#busy = false
    }
  }
}
