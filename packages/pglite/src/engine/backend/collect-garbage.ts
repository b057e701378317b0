import { nodeBuiltinIfAny } from '../node-builtin.js'

type Collect = () => void

let collect: Collect | null | undefined

/**
 * V8's own full collection, in Node; null where it cannot be had. Without
 * `--expose-gc` the function is taken from a fresh context made while the
 * flag is briefly on (what jest's leak detector does); the flag is put back
 * at once, so the process's own global never gains a `gc`.
 */
function fullCollection(): Collect | null {
  if (collect !== undefined) return collect
  collect = null
  const own = (globalThis as { gc?: unknown }).gc
  if (typeof own === 'function') return (collect = own as Collect)
  const v8 = nodeBuiltinIfAny<typeof import('node:v8')>('node:v8')
  const vm = nodeBuiltinIfAny<typeof import('node:vm')>('node:vm')
  if (!v8 || !vm) return null
  try {
    v8.setFlagsFromString('--expose-gc')
    try {
      const found: unknown = vm.runInNewContext('gc')
      if (typeof found === 'function') collect = found as Collect
    } finally {
      v8.setFlagsFromString('--no-expose-gc')
    }
  } catch {
    // A runtime that refuses the flag keeps the memory until its next full collection.
  }
  return collect
}

/**
 * Runs a full collection on a later turn, so a module just let go of gives
 * back its wasm memory now. V8 frees a dropped `WebAssembly.Memory` only in
 * a full collection, which an idle process runs 10-15 s later at the
 * earliest: until then a server whose first database booted held ~40% more
 * than one that restored. A no-op outside Node.
 */
export function collectGarbageSoon(): void {
  const run = fullCollection()
  if (!run) return
  const timer = setTimeout(run, 0)
  if (typeof timer === 'object' && timer !== null && 'unref' in timer) timer.unref()
}

/** Runs a full collection now, where one can be had (see {@link collectGarbageSoon}). */
export function collectGarbageNow(): void {
  fullCollection()?.()
}
