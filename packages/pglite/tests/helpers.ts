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

/** A frontend Query message: 'Q', int32 length, the SQL, NUL. */
export function queryMessage(sql: string): Uint8Array {
  const text = new TextEncoder().encode(sql)
  const out = new Uint8Array(1 + 4 + text.length + 1)
  out[0] = 0x51 /* Q */
  new DataView(out.buffer).setInt32(1, 4 + text.length + 1)
  out.set(text, 5)
  return out
}

/** The type letters of the frames in a reply, in order. */
export function frameTypes(bytes: Uint8Array): string {
  let types = ''
  for (let i = 0; i < bytes.length; ) {
    types += String.fromCharCode(bytes[i]!)
    i += 1 + new DataView(bytes.buffer, bytes.byteOffset + i + 1, 4).getInt32(0)
  }
  return types
}
