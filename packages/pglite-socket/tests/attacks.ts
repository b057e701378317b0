/** Pieces of the hostile clients' SQL, shared by the attack tests and the soak. */

/** 200 constant columns: a `PREPARE` of them keeps ~1.2 MB when 500 share one query string. */
export const COLUMNS = Array.from({ length: 200 }, (_, i) => `${i} as c${i}`).join(', ')

/** `name` as a Unicode-escaped identifier: `U&"\0063..."`, every character escaped. */
export function unicodeEscaped(name: string): string {
  return `U&"${[...name].map((ch) => `\\${ch.codePointAt(0)!.toString(16).padStart(4, '0')}`).join('')}"`
}

/** A small seeded generator (mulberry32): a random order that is the same at every run. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}
