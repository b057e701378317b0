/** Waiting in tests: promises settled from outside, time limits, polling. */

/** A promise plus the functions that settle it. */
export interface Deferred<T> {
  readonly promise: Promise<T>
  readonly resolve: (value: T) => void
  readonly reject: (error: unknown) => void
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/** Rejects with `message` if `promise` has not settled within `ms`: a call that never settles is what many tests look for. */
export async function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${message}`)), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}

/** Resolves once `check` holds, polling every 20 ms; fails after `ms`. */
export async function eventually(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen in ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** Wakes whoever waits for "something changed" (new bytes, a notification, a query done). */
export class Waiters {
  #waiting: Array<() => void> = []

  /** Resolves at the next `wake()`. */
  next(): Promise<void> {
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  wake(): void {
    const waiting = this.#waiting
    this.#waiting = []
    for (const resolve of waiting) resolve()
  }
}
