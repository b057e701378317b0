import type { PostgresModule } from './emscripten.js'

/**
 * What Postgres linked at run time in one module: the `dlopen` handles (the
 * address of libc's `struct dso`) and the `dlsym` lookups that grew the
 * function table, in order. A snapshot of a backend with side modules
 * carries them, so that a module
 * with the same side modules preloaded can be linked the same way before
 * the snapshot's memory goes in (the glue keeps its half of each link in
 * JavaScript, outside memory).
 */
export interface DynamicLinks {
  readonly opens: number[]
  /**
   * The lookups that added a function to the table: [handle, symbol, the
   * table index]. The others left nothing outside memory (the glue writes
   * the symbol's index into libc's memory), so they need no replay.
   */
  readonly syms: [number, string, number][]
  /**
   * The function table's length once the side modules were preloaded (before
   * Postgres started); undefined when none were.
   */
  preparedTable?: number
  /**
   * A library was loaded that was not preloaded: it took memory from the heap
   * of the moment, which a replay cannot take again at the same place.
   */
  unreplayable: boolean
}

/** Records every successful `dlopen` and `dlsym` of the module the imports are for, into `links`. */
export function recordDynamicLinks(
  env: Record<string, unknown>,
  links: DynamicLinks,
  module: () => PostgresModule | undefined,
  tableLength: () => number,
): void {
  const open = env._dlopen_js as (handle: number) => number
  env._dlopen_js = (handle: number): number => {
    const before = tableLength()
    const result = open(handle)
    if (result) links.opens.push(handle)
    // A preloaded library is only linked here; any other one is instantiated, and takes table slots.
    if (tableLength() !== before) links.unreplayable = true
    return result
  }
  const sym = env._dlsym_js as (handle: number, symbol: number, index: number) => number
  env._dlsym_js = (handle: number, symbol: number, index: number): number => {
    const before = tableLength()
    const result = sym(handle, symbol, index)
    const mod = module()
    if (result && mod && tableLength() !== before) links.syms.push([handle, mod.UTF8ToString(symbol), result])
    return result
  }
}

/**
 * Links `mod` as the recorded module was linked: each handle opened again
 * and each symbol looked up again, in order. Run on a module whose side
 * modules were preloaded as the recorded one's were, with the snapshot's
 * memory in place (the handles point into it).
 * @throws Error when a lookup lands elsewhere than recorded (the layouts differ).
 */
export function replayDynamicLinks(
  mod: PostgresModule,
  env: Record<string, unknown>,
  links: { readonly opens: readonly number[]; readonly syms: readonly (readonly [number, string, number])[] },
): void {
  const open = env._dlopen_js as (handle: number) => number
  const sym = env._dlsym_js as (handle: number, symbol: number, index: number) => number
  for (const handle of links.opens) {
    if (!open(handle)) throw new Error(`dlopen of the library at ${handle} failed while restoring`)
  }
  const sp = mod.stackSave()
  try {
    for (const [handle, name, expected] of links.syms) {
      const symbol = mod.stringToUTF8OnStack(name)
      // Where the glue notes the symbol's index for libc: scratch below the stack pointer.
      const index = (mod.stackSave() - 16) & ~7
      const got = sym(handle, symbol, index)
      if (got !== expected) throw new Error(`dlsym of ${name} gave ${got}, the snapshot's ${expected}`)
    }
  } finally {
    mod.stackRestore(sp)
  }
}
