import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { LzmaDecoder, decodeLzma, decodeLzmaInSlices } from '../src/engine/files/lzma.js'

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist')

/** The browser build's template (xz's .lzma) and the Node build's (gzip) are one image. */
const packed = () => readFileSync(join(dist, 'browser', 'assets', 'template.pgwt.lzma'))
const image = () => gunzipSync(readFileSync(join(dist, 'engine', 'default-template.pgwt.gz')))

describe('the .lzma decoder of the browser build (run `pnpm build` first; `pnpm test` does)', () => {
  it("decodes the shipped template to the Node build's image, whole and in slices", async () => {
    const want = image()
    expect(Buffer.from(decodeLzma(packed(), want.length)).equals(want)).toBe(true)
    expect(Buffer.from(await decodeLzmaInSlices(packed(), want.length)).equals(want)).toBe(true)
  })

  it('stops and resumes at any step size', () => {
    const want = image()
    const decoder = new LzmaDecoder(packed(), want.length)
    let steps = 0
    while (!decoder.step(1 + ((steps * 7919) % 8192))) steps++
    expect(Buffer.from(decoder.output).equals(want)).toBe(true)
    expect(steps).toBeGreaterThan(1000)
  })

  it('rejects truncated data, a wrong size and what is not .lzma', () => {
    const bytes = packed()
    expect(() => decodeLzma(bytes.subarray(0, bytes.length >> 1), image().length)).toThrow(/truncated|corrupt/)
    expect(() => decodeLzma(bytes, image().length + 1)).toThrow(/\.lzma/)
    expect(() => decodeLzma(new Uint8Array(64).fill(0xff))).toThrow(/not an \.lzma file/)
  })
})
