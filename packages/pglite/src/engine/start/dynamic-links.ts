import type { PostgresModule } from '../emscripten.js'

/**
 * What Postgres linked at run time in one module: the `dlopen` handles (the
 * address of libc's `struct dso`) and the `dlsym` lookups that gave it a
 * function-table index, in order. A snapshot of a backend with side modules
 * carries them, so that a module
 * with the same side modules preloaded can be linked the same way before
 * the snapshot's memory goes in (the glue keeps its half of each link in
 * JavaScript, outside memory).
 */
export interface DynamicLinks {
  readonly opens: number[]
  /**
   * Every lookup that answered a function-table index past the preloaded
   * ones: [handle, symbol, the index], the first per handle and symbol.
   * Postgres keeps the index (its cache of C functions), so a restore must
   * find each at the same slot. A lookup the glue answered from a slot it
   * had filled before (a module that served another database) counts too:
   * it is in the memory all the same, and a module that got its slots in
   * another order must refuse it. The slots below `preparedTable` are the
   * preload's (the loader gives every exported function one), the same in
   * every module preloaded the same way: most lookups land there, and need
   * neither a record nor a replay.
   */
  readonly syms: [number, string, number][]
  /**
   * The function table's length once the side modules were preloaded (before
   * Postgres started); undefined when none were.
   */
  preparedTable?: number
  /**
   * The program break once the side modules were preloaded: where their
   * data ends. A module preloaded in another process (or by another build
   * of this code) must end there too, or its side modules' data lies
   * elsewhere than the snapshot's memory has it. Undefined where not known.
   */
  preparedBreak?: number
  /**
   * A library was loaded that was not preloaded: it took memory from the heap
   * of the moment, which a replay cannot take again at the same place.
   */
  unreplayable: boolean
  /** Set while a restore replays a snapshot's links: they are the snapshot's, recorded by the restore. */
  replaying: boolean
  /**
   * Every lookup this module's glue answered, by library path and symbol,
   * with the function in that slot. The table outlives the databases a
   * module serves, so a replay, and Postgres' own lookups in each restored
   * database, find most of theirs here (the glue's own lookup lists
   * pgcrypto's 1,456 exports for each one).
   */
  readonly known: Map<string, { readonly index: number; readonly fn: unknown }>
}

/** The glue's `struct dso` keeps the library's path at this offset (its `dlopenInternal` reads it there). */
const DSO_NAME = 36

function knownKey(mod: PostgresModule, handle: number, symbol: string): string {
  return `${mod.UTF8ToString(handle + DSO_NAME)}\0${symbol}`
}

/** Records every successful `dlopen` and `dlsym` of the module the imports are for, into `links`. */
export function recordDynamicLinks(
  env: Record<string, unknown>,
  links: DynamicLinks,
  module: () => PostgresModule | undefined,
  table: () => WebAssembly.Table | undefined,
): void {
  const tableLength = (): number => table()?.length ?? 0
  const open = env._dlopen_js as (handle: number) => number
  env._dlopen_js = (handle: number): number => {
    const before = tableLength()
    const result = open(handle)
    if (result && !links.replaying) links.opens.push(handle)
    // A preloaded library is only linked here; any other one is instantiated, and takes table slots.
    if (tableLength() !== before) links.unreplayable = true
    return result
  }
  const sym = env._dlsym_js as (handle: number, symbol: number, index: number) => number
  env._dlsym_js = (handle: number, symbol: number, index: number): number => {
    const mod = module()
    const slots = table()
    if (!mod || !slots) return sym(handle, symbol, index)
    const name = mod.UTF8ToString(symbol)
    const key = knownKey(mod, handle, name)
    // Answered before in this module, its function still in that slot: the
    // glue would answer the same, after listing the library's exports
    // (pgcrypto's 1,456, ~1 ms) for each C function a restored database
    // calls first.
    const known = links.known.get(key)
    const hit = known !== undefined && known.index < slots.length && slots.get(known.index) === known.fn
    const result = hit ? known.index : sym(handle, symbol, index)
    // A data symbol comes back as no index: nothing of it is outside memory.
    if (typeof result !== 'number' || result <= 0) return result
    if (!hit) links.known.set(key, { index: result, fn: slots.get(result) })
    if (links.preparedTable !== undefined && result < links.preparedTable) return result
    if (!links.replaying && !links.syms.some(([h, s]) => h === handle && s === name)) links.syms.push([handle, name, result])
    return result
  }
}

/** The part of a module's control (module.ts) that {@link notePrepared} reads and writes. */
interface PreparedModule {
  readonly links: DynamicLinks
  readonly instance?: WebAssembly.Instance
  readonly imports?: WebAssembly.Imports
}

/** Notes the table and the program break of a module whose side modules were just preloaded. */
export function notePrepared(control: PreparedModule): void {
  const exports = control.instance!.exports
  control.links.preparedTable = (exports.__indirect_function_table as WebAssembly.Table).length
  control.links.preparedBreak = programBreak(control)
}

/** Where the heap ends now (libc's `sbrk(0)`; the engine imports its memory). */
function programBreak(control: PreparedModule): number {
  const at = (control.instance!.exports.emscripten_get_sbrk_ptr as () => number)()
  return new DataView((control.imports!.env!.memory as WebAssembly.Memory).buffer).getUint32(at, true)
}

/** The links a snapshot carries (see {@link DynamicLinks}). */
export interface RecordedLinks {
  readonly opens: readonly number[]
  readonly syms: readonly (readonly [number, string, number])[]
}

/**
 * Links `mod` as the recorded module was linked: each handle opened again
 * and each symbol looked up again, in order, then makes them `links`'
 * record. Run on a module whose side modules were preloaded as the recorded
 * one's were, with the snapshot's memory in place (the handles point into
 * it). A lookup this module's glue already answered with the same slot,
 * whose function is still there, is not asked again.
 * @throws Error when a lookup lands elsewhere than recorded (the layouts differ).
 */
export function replayDynamicLinks(mod: PostgresModule, env: Record<string, unknown>, recorded: RecordedLinks, links: DynamicLinks, table: WebAssembly.Table): void {
  const open = env._dlopen_js as (handle: number) => number
  const sym = env._dlsym_js as (handle: number, symbol: number, index: number) => number
  links.replaying = true
  const sp = mod.stackSave()
  try {
    for (const handle of recorded.opens) {
      if (!open(handle)) throw new Error(`dlopen of the library at ${handle} failed while restoring`)
    }
    for (const [handle, name, expected] of recorded.syms) {
      // A slot the preload filled is the same in this module (none is recorded, but a check costs nothing).
      if (links.preparedTable !== undefined && expected < links.preparedTable) continue
      const known = links.known.get(knownKey(mod, handle, name))
      if (known && known.index === expected && expected < table.length && table.get(expected) === known.fn) continue
      const symbol = mod.stringToUTF8OnStack(name)
      // Where the glue notes the symbol's index for libc: scratch below the stack pointer.
      const index = (mod.stackSave() - 16) & ~7
      const got = sym(handle, symbol, index)
      if (got !== expected) throw new Error(`dlsym of ${name} gave ${got}, the snapshot's ${expected}`)
    }
  } finally {
    mod.stackRestore(sp)
    links.replaying = false
  }
  links.opens.splice(0, links.opens.length, ...recorded.opens)
  links.syms.splice(0, links.syms.length, ...recorded.syms.map((l) => [...l] as [number, string, number]))
}

/**
 * Whether a module preloaded as the recorded one was, and nothing else,
 * gives every recorded lookup the slot recorded: the lookups took new
 * slots in the order recorded, one each, and nothing else grew the table.
 * A snapshot of a module that served other databases first may hold slots
 * in another order; it restores into such modules only, never into a new
 * one (another process's).
 */
export function replaysOnNewModule(recorded: RecordedLinks, preparedTable: number, tableLength: number): boolean {
  let next = preparedTable
  const given = new Set<number>()
  for (const [, , index] of recorded.syms) {
    if (index < preparedTable || given.has(index)) continue
    if (index !== next) return false
    given.add(next++)
  }
  return tableLength === next
}
