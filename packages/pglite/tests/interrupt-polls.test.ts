import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { addInterruptPolls, pollSlotOf, pollingSideModule } from '../src/engine/loading/interrupt-polls.js'

/*
 * The rewrite that makes the engine's interrupt checks poll the host
 * (engine/loading/interrupt-polls.ts), on the pinned engine's own binaries. What it
 * is for (stopping statements) is tested in runaway.test.ts.
 */
const engine = readFileSync(createRequire(import.meta.url).resolve('@electric-sql/pglite/pglite.wasm'))

describe('interrupt polls', () => {
  const polled = addInterruptPolls(engine)

  it('rewrites every read of InterruptPending of the engine, keeping a valid module with the same imports and exports (and the two globals of untimed waits)', () => {
    expect(polled.sites).toBe(466)
    const before = new WebAssembly.Module(engine)
    const after = new WebAssembly.Module(polled.bytes)
    expect(WebAssembly.Module.imports(after)).toEqual(WebAssembly.Module.imports(before))
    expect(WebAssembly.Module.exports(after)).toEqual([
      ...WebAssembly.Module.exports(before),
      { name: 'pgwasm_untimed_wait', kind: 'global' },
      { name: 'pgwasm_untimed_wait_latch', kind: 'global' },
    ])
    // Each check grows by its countdown (16 bytes here), plus the appended pieces.
    expect(polled.bytes.byteLength - engine.byteLength).toBeLessThan(polled.sites * 20 + 100)
  })

  it('finds the poll slot in a binary it made, and none in the original', () => {
    expect(pollSlotOf(polled.bytes)).toBe(polled.pollSlot)
    expect(pollSlotOf(engine)).toBeUndefined()
  })

  it('leaves its input untouched: a second rewrite of the same bytes gives the same module', () => {
    expect(Buffer.from(addInterruptPolls(engine).bytes).equals(Buffer.from(polled.bytes))).toBe(true)
  })

  it('refuses a binary without interrupt checks rather than run it unstoppable', () => {
    // A minimal module: the header only.
    expect(() => addInterruptPolls(Uint8Array.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]))).toThrow(/no section/)
  })

  it('returns a side module that does not read the flag as it is, and caches what it rewrote', () => {
    const plain = Uint8Array.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0])
    expect(pollingSideModule(plain, polled.pollSlot)).toBe(plain)
  })
})
