/**
 * A decoder for `.lzma` files (LZMA-alone: `xz --format=lzma`), for the
 * browser build's engine assets. The template and the engine's memory image
 * are half the size gzip makes them (a 8 MB template: 590 kB against 970
 * kB), which is what keeps a first visit under its budget; the browser has
 * no native LZMA, and a decoder is small. It is synchronous, so that a file
 * Postgres opens mid-query can be decoded where it is asked for
 * (lazy-files.ts), and it can stop and resume every so many bytes, so that
 * a large image does not hold the page's thread in one piece.
 *
 * The whole output is one array, which is also the dictionary; the loop
 * is in lzma-loop.ts.
 */

import { LITERAL, PROB_INIT, decodeRun, type LzmaCoder } from './lzma-loop.js'
import { nextTask } from './tree-image.js'

/** Reads an LZMA-alone file into one array, in steps. */
export class LzmaDecoder {
  readonly output: Uint8Array
  readonly #coder: LzmaCoder
  #done = false

  /**
   * @param size the decoded size, when the header does not carry it (xz
   *   writes "unknown" when it compresses a stream); checked either way.
   * @throws Error on a header that is not LZMA-alone's.
   */
  constructor(input: Uint8Array, size?: number) {
    if (input.byteLength < 18) throw new Error('not an .lzma file: too short')
    let props = input[0]!
    if (props >= 9 * 5 * 5) throw new Error('not an .lzma file: bad properties byte')
    const lc = props % 9
    props = (props / 9) | 0
    const lp = props % 5
    const pb = (props / 5) | 0
    const view = new DataView(input.buffer, input.byteOffset, input.byteLength)
    const low = view.getUint32(5, true)
    const high = view.getUint32(9, true)
    const known = !(low === 0xffffffff && high === 0xffffffff)
    if (known && high !== 0) throw new Error('.lzma file too large')
    if (known && size !== undefined && low !== size) throw new Error(`.lzma file holds ${low} bytes, ${size} expected`)
    const length = known ? low : size
    if (length === undefined) throw new Error('.lzma file of unknown size')
    if (input[13] !== 0) throw new Error('corrupt .lzma data')
    this.output = new Uint8Array(length)
    // Range, code (the first 4 bytes after the zero), input position; the rest start at 0.
    const s = new Float64Array(9)
    s[0] = 0xffffffff
    s[1] = ((input[14]! << 24) | (input[15]! << 16) | (input[16]! << 8) | input[17]!) >>> 0
    s[2] = 18
    const probs = new Uint16Array(LITERAL + (0x300 << (lc + lp))).fill(PROB_INIT)
    this.#coder = { s, out: this.output, input, probs, lc, lp, pb }
  }

  /** Whether every byte is decoded. */
  get done(): boolean {
    return this.#done
  }

  /** Decodes about `budget` more bytes (at least the rest of a match); @returns whether all are done. @throws Error on corrupt data. */
  step(budget = Infinity): boolean {
    if (!this.#done) this.#done = decodeRun(this.#coder, budget)
    return this.#done
  }
}

/** Decodes a whole `.lzma` file at once. @throws Error on corrupt or truncated data. */
export function decodeLzma(input: Uint8Array, size?: number): Uint8Array {
  const decoder = new LzmaDecoder(input, size)
  decoder.step()
  return decoder.output
}

/**
 * Decodes a `.lzma` file in slices of about 1 MB, each in its own task, so
 * that IndexedDB and lock callbacks of the page still run meanwhile.
 */
export async function decodeLzmaInSlices(input: Uint8Array, size?: number): Promise<Uint8Array> {
  const decoder = new LzmaDecoder(input, size)
  while (!decoder.step(SLICE)) await nextTask()
  return decoder.output
}

const SLICE = 1 << 20
