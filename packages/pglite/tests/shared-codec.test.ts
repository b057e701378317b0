import { describe, expect, it } from 'vitest'
import { SharedWriter, Unencodable, decodeShared } from '../src/worker/shared-codec.js'

const memory = new Uint8Array(new SharedArrayBuffer(1 << 16))
const writer = new SharedWriter(memory)

/** Through shared memory and back, as the worker lane carries a message. */
function roundTrip(value: unknown): unknown {
  const length = writer.encode(value)
  return decodeShared(memory.slice(0, length))
}

describe('shared-memory codec of the worker lane', () => {
  it('delivers every covered value as structured clone does', () => {
    const proto = JSON.parse('{"__proto__": {"x": 1}, "a": 2}') as Record<string, unknown>
    const values: unknown[] = [
      undefined,
      null,
      true,
      false,
      0,
      -0,
      1,
      -1,
      2 ** 31 - 1,
      -(2 ** 31),
      2 ** 31,
      0.1,
      NaN,
      Infinity,
      -Infinity,
      Number.MAX_SAFE_INTEGER,
      '',
      'ascii text of some length, more than sixty-four characters long, to leave the short path',
      'grüße, 日本語, emoji 🎉',
      '\u0000 nul and \n newline',
      12345678901234567890n,
      -5n,
      new Date('2024-02-29T12:34:56.789Z'),
      new Date(NaN),
      new Uint8Array([0, 1, 2, 255]),
      new Uint8Array(0),
      [1, 'two', [3, [4]], null, undefined],
      { rows: [{ id: 1, name: 'x', tags: ['a', 'b'], meta: { nested: true } }], fields: [{ name: 'id', dataTypeID: 23 }], affectedRows: 0 },
      Object.assign(Object.create(null) as object, { a: 1 }),
      proto,
    ]
    for (const value of values) {
      const copy = roundTrip(value)
      expect(copy).toStrictEqual(structuredClone(value))
    }
    const decoded = roundTrip(proto) as Record<string, unknown>
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype)
    expect(Object.keys(decoded)).toEqual(['__proto__', 'a'])
  })

  it('gives a Uint8Array its own buffer, not a view of shared memory', () => {
    const bytes = roundTrip(new Uint8Array([9, 8, 7])) as Uint8Array
    expect(bytes.buffer).toBeInstanceOf(ArrayBuffer)
    expect(bytes.byteLength).toBe(bytes.buffer.byteLength)
  })

  it('refuses what it does not cover, so the message goes by postMessage', () => {
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    class Money {
      constructor(readonly cents: number) {}
    }
    for (const value of [() => 1, Symbol('s'), new Map(), new Set([1]), new Int32Array(2), new ArrayBuffer(4), new Money(5), cyclic, [new Error('e')]]) {
      expect(() => writer.encode(value)).toThrow(Unencodable)
    }
  })

  it('refuses a message larger than the shared memory, then encodes the next one', () => {
    expect(() => writer.encode('x'.repeat(1 << 16))).toThrow(Unencodable)
    expect(() => writer.encode({ s: 'é'.repeat(40_000) })).toThrow(Unencodable)
    expect(() => writer.encode(new Uint8Array(1 << 16))).toThrow(Unencodable)
    expect(roundTrip({ after: 'ok' })).toEqual({ after: 'ok' })
  })
})
