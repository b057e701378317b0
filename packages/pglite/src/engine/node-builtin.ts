/** Whether this runs in Node (or a runtime that presents itself as Node). */
export const inNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string'

/**
 * A Node built-in module, looked up when called: the engine code is also
 * bundled for the browser, where a static `node:` import cannot stand. Only
 * called on paths that run in Node (a directory mount).
 */
export function nodeBuiltin<T>(id: string): T {
  return (process as unknown as { getBuiltinModule(id: string): T }).getBuiltinModule(id)
}

/** {@link nodeBuiltin}, or undefined outside Node (or where the runtime has no such module). */
export function nodeBuiltinIfAny<T>(id: string): T | undefined {
  if (typeof process === 'undefined' || typeof (process as { getBuiltinModule?: unknown }).getBuiltinModule !== 'function') return undefined
  try {
    return nodeBuiltin<T>(id)
  } catch {
    return undefined
  }
}
