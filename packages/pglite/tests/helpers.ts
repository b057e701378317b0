/** Small helpers the core package's test files share. */

/** `parts` back to back in one new array. */
export function concat(parts: readonly Uint8Array[]): Uint8Array {
  let length = 0
  for (const p of parts) length += p.length
  const out = new Uint8Array(length)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** The rejection of `promise`; fails the test if it resolves instead. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${safeString(value)}`)
    },
    (error: unknown) => error,
  )
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}
