/** mulberry32: a small seeded PRNG, so generated data is identical across runs and engines. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export function randomInt(next: () => number, below: number): number {
  return Math.floor(next() * below)
}

export function randomLetters(next: () => number, length: number): string {
  let s = ''
  for (let i = 0; i < length; i++) s += String.fromCharCode(97 + randomInt(next, 26))
  return s
}
