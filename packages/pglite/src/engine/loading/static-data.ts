/**
 * The engine's static data (below `__heap_base`) read for records found by
 * name: a setting's `config_generic`, a built-in function's `fmgr_builtins`
 * entry. Both start with (or hold) a pointer to their name as a C string.
 */
export interface StaticData {
  readonly heap: Uint8Array
  /** One character per byte, so string offsets are addresses. */
  readonly text: string
  readonly words: Uint32Array
}

export function readStaticData(heap: Uint8Array, heapBase: number): StaticData {
  // The names sought are ASCII, so the decoder's mapping of high bytes does
  // not matter; a native string search is ~100x faster than a byte loop.
  return { heap, text: new TextDecoder('latin1').decode(heap.subarray(0, heapBase)), words: new Uint32Array(heap.buffer, 0, heapBase >>> 2) }
}

/** Addresses of the 4-byte words that point at the C string `name` (the linker may have merged it into the tail of a longer one). */
export function pointersTo(data: StaticData, name: string): number[] {
  const found: number[] = []
  const needle = `${name}\0`
  for (let at = data.text.indexOf(needle, 1); at >= 0; at = data.text.indexOf(needle, at + 1)) {
    for (let w = data.words.indexOf(at); w >= 0; w = data.words.indexOf(at, w + 1)) found.push(w * 4)
  }
  return found
}

/** Whether the C string at `at` is `name`. */
export function holdsCString(heap: Uint8Array, at: number, name: string): boolean {
  if (at <= 0 || at + name.length >= heap.length) return false
  for (let i = 0; i < name.length; i++) if (heap[at + i] !== name.charCodeAt(i)) return false
  return heap[at + name.length] === 0
}
