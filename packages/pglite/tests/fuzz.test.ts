import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cstr as cstring, frame } from '@pgwasm/test-support/frontend'
import { concat } from './helpers.js'
import fc from 'fast-check'
import { serialize } from 'pg-protocol'
import { FrameScanner, type FrameSink } from '../src/protocol/frames.js'
import { ResultCollector, type RowMode } from '../src/protocol/decode.js'
import { defaultParsers } from '../src/types/index.js'
import { DatabaseError, PGlite, ProtocolError } from '../src/index.js'

/** Fixed seed: a failure names the same counterexample on every run. */
const SEED = 20_251_122

const enc = new TextEncoder()

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')
}

/** Chunk boundaries: sorted cut offsets in 0..length (repeats give empty chunks). */
function chunksOf(bytes: Uint8Array, cuts: readonly number[], bytewise: boolean): Uint8Array[] {
  if (bytewise) return Array.from({ length: bytes.length }, (_, i) => bytes.subarray(i, i + 1))
  const points = cuts.map((c) => c % (bytes.length + 1)).sort((a, b) => a - b)
  const chunks: Uint8Array[] = []
  let from = 0
  for (const p of points) {
    chunks.push(bytes.subarray(from, p))
    from = p
  }
  chunks.push(bytes.subarray(from))
  return chunks
}

/**
 * Pushes chunks the way the engine does: each one is a view of a scratch
 * buffer (WASM memory) that is overwritten as soon as `push` returns, so a
 * scanner or sink that kept a view past its call would see garbage.
 */
function pushLikeEngine(scanner: FrameScanner, chunks: readonly Uint8Array[]): void {
  const size = chunks.reduce((n, c) => Math.max(n, c.length), 0)
  const memory = new Uint8Array(size + 16)
  for (const chunk of chunks) {
    const at = chunk.length % 7
    memory.set(chunk, at)
    scanner.push(memory.subarray(at, at + chunk.length))
    memory.fill(0xee)
  }
}

const chunking = fc.record({
  cuts: fc.array(fc.nat({ max: 1_000_000 }), { maxLength: 48 }),
  // Now and then every byte alone.
  bytewise: fc.oneof({ weight: 12, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
})

// ---------------------------------------------------------------- FrameScanner

interface SeenFrame {
  type: number
  body: string
}

class Recorder implements FrameSink {
  readonly frames: SeenFrame[] = []
  onFrame(type: number, buf: Uint8Array, start: number, end: number): void {
    this.frames.push({ type, body: hex(buf.subarray(start, end)) })
  }
}

/** The reference: walks the whole buffer at once. */
function referenceSplit(bytes: Uint8Array): SeenFrame[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out: SeenFrame[] = []
  for (let i = 0; i < bytes.length; ) {
    const length = view.getUint32(i + 1)
    out.push({ type: bytes[i]!, body: hex(bytes.subarray(i + 5, i + 1 + length)) })
    i += 1 + length
  }
  return out
}

const backendType = fc.oneof(
  fc.constantFrom(...[...'DTCZAENS12nst'].map((c) => c.charCodeAt(0))),
  fc.integer({ min: 0, max: 255 }),
)

const backendFrame = fc.record({
  type: backendType,
  body: fc.oneof(
    { weight: 3, arbitrary: fc.uint8Array({ maxLength: 64 }) },
    { weight: 1, arbitrary: fc.uint8Array({ minLength: 200, maxLength: 3000 }) },
  ),
})

const backendStream = fc.array(backendFrame, { maxLength: 24 })

describe('FrameScanner (property)', () => {
  it('reports the same frames as a whole-buffer splitter however the stream is chunked', () => {
    fc.assert(
      fc.property(backendStream, chunking, (frames, { cuts, bytewise }) => {
        const bytes = concat(frames.map((f) => frame(f.type, f.body)))
        const recorder = new Recorder()
        const scanner = new FrameScanner(recorder)
        pushLikeEngine(scanner, chunksOf(bytes, cuts, bytewise))
        expect(recorder.frames).toEqual(referenceSplit(bytes))
        expect(scanner.midFrame).toBe(false)
      }),
      { seed: SEED, numRuns: 1500 },
    )
  })

  it('reports only the wanted types, with identical bodies, however the stream is chunked', () => {
    fc.assert(
      fc.property(backendStream, fc.uniqueArray(backendType, { maxLength: 6 }), chunking, (frames, wanted, { cuts, bytewise }) => {
        const wantedSet = new Set(wanted)
        const wants = (type: number): boolean => wantedSet.has(type)
        const bytes = concat(frames.map((f) => frame(f.type, f.body)))
        const recorder = new Recorder()
        const scanner = new FrameScanner(recorder, wants)
        pushLikeEngine(scanner, chunksOf(bytes, cuts, bytewise))
        expect(recorder.frames).toEqual(referenceSplit(bytes).filter((f) => wants(f.type)))
        expect(scanner.midFrame).toBe(false)
      }),
      { seed: SEED, numRuns: 800 },
    )
  })
})

// ------------------------------------------------------------- ResultCollector

const TEXT = 25
const INT4 = 23
const INT8 = 20
const BOOL = 16
const FLOAT8 = 701
const JSON_OID = 114
const BYTEA = 17
const NUMERIC = 1700

/** float8 text output as PostgreSQL 12+ prints it (shortest exact digits, %e outside 1e-4..1e15). */
function float8Text(x: number): string {
  if (Number.isNaN(x)) return 'NaN'
  if (x === Infinity) return 'Infinity'
  if (x === -Infinity) return '-Infinity'
  if (Object.is(x, -0)) return '-0'
  const exp = x.toExponential()
  const e = Number(exp.slice(exp.indexOf('e') + 1))
  if (e < -4 || e >= 15) {
    const [mantissa, power] = exp.split('e') as [string, string]
    const sign = power.startsWith('-') ? '-' : '+'
    return `${mantissa}e${sign}${power.replace(/^[+-]/, '').padStart(2, '0')}`
  }
  return String(x)
}

const digits = (min: number, max: number) =>
  fc.array(fc.constantFrom(...'0123456789'), { minLength: min, maxLength: max }).map((d) => d.join(''))

/** A column value of each type, as its text output (null for NULL). */
const valueText: Record<number, fc.Arbitrary<string>> = {
  [TEXT]: fc.string({ unit: 'grapheme', maxLength: 60 }).map((s) => s.replaceAll('\0', '')),
  [INT4]: fc.integer().map(String),
  [INT8]: fc
    .oneof(
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      fc.bigInt({ min: -(2n ** 53n) - 4n, max: -(2n ** 53n) + 4n }),
      fc.bigInt({ min: 2n ** 53n - 4n, max: 2n ** 53n + 4n }),
    )
    .map(String),
  [BOOL]: fc.boolean().map((b) => (b ? 't' : 'f')),
  [FLOAT8]: fc.double().map(float8Text),
  [JSON_OID]: fc.json({ maxDepth: 3 }),
  [BYTEA]: fc.uint8Array({ maxLength: 48 }).map((b) => `\\x${hex(b)}`),
  [NUMERIC]: fc.oneof(
    fc.constantFrom('NaN', 'Infinity', '-Infinity', '0'),
    fc
      .tuple(fc.boolean(), digits(1, 30), fc.option(digits(1, 20), { nil: undefined }))
      .map(([neg, int, frac]) => `${neg ? '-' : ''}${int.replace(/^0+(?=\d)/, '')}${frac === undefined ? '' : `.${frac}`}`),
  ),
}

const columnName = fc
  .oneof(
    { weight: 4, arbitrary: fc.string({ unit: 'grapheme', maxLength: 16 }) },
    { weight: 1, arbitrary: fc.constantFrom('a', 'b', '?column?', 'constructor', 'toString', '__proto__', '0', 'naïve ☃ 名前') },
  )
  .map((s) => s.replaceAll('\0', ''))

const column = fc.record({
  name: columnName,
  type: fc.constantFrom(TEXT, INT4, INT8, BOOL, FLOAT8, JSON_OID, BYTEA, NUMERIC),
})

/** One statement's result: its columns and rows of text values (null = NULL). */
const resultSet = fc.array(column, { minLength: 1, maxLength: 8 }).chain((columns) =>
  fc.record({
    columns: fc.constant(columns),
    rows: fc.array(fc.tuple(...columns.map((c) => fc.option(valueText[c.type]!, { nil: null, freq: 6 }))), { maxLength: 12 }),
  }),
)

function rowDescription(columns: readonly { name: string; type: number }[]): Uint8Array {
  const parts: Uint8Array[] = [new Uint8Array([columns.length >> 8, columns.length & 0xff])]
  columns.forEach((c, i) => {
    const meta = new Uint8Array(18)
    const view = new DataView(meta.buffer)
    view.setUint32(0, 16384 + i) // table OID
    view.setInt16(4, i + 1) // column number
    view.setUint32(6, c.type)
    view.setInt16(10, -1) // type size
    view.setInt32(12, -1) // type modifier
    view.setInt16(16, 0) // text format
    parts.push(enc.encode(c.name), new Uint8Array([0]), meta)
  })
  return frame(0x54, concat(parts))
}

function dataRow(values: readonly (string | null)[]): Uint8Array {
  const parts: Uint8Array[] = [new Uint8Array([values.length >> 8, values.length & 0xff])]
  for (const v of values) {
    const length = new Uint8Array(4)
    if (v === null) {
      new DataView(length.buffer).setInt32(0, -1)
      parts.push(length)
    } else {
      const bytes = enc.encode(v)
      new DataView(length.buffer).setInt32(0, bytes.length)
      parts.push(length, bytes)
    }
  }
  return frame(0x44, concat(parts))
}

/** What the backend writes for a (multi-statement) simple query. */
function backendReply(sets: readonly { columns: { name: string; type: number }[]; rows: (string | null)[][] }[]): Uint8Array {
  const parts: Uint8Array[] = []
  for (const set of sets) {
    parts.push(rowDescription(set.columns))
    for (const row of set.rows) parts.push(dataRow(row))
    parts.push(frame(0x43, cstring(`SELECT ${set.rows.length}`)))
  }
  parts.push(frame(0x5a, enc.encode('I')))
  return concat(parts)
}

/** The reference decode: each field's text through the same parser table, rows built like PGlite does. */
function referenceRows(columns: readonly { name: string; type: number }[], rows: readonly (string | null)[][], mode: RowMode): unknown[] {
  return rows.map((row) => {
    const values = row.map((text, i) => {
      if (text === null) return null
      const oid = columns[i]!.type
      const parse = defaultParsers[oid]
      return parse ? parse(text, oid) : text
    })
    return mode === 'array' ? values : Object.fromEntries(values.map((v, i) => [columns[i]!.name, v]))
  })
}

describe('ResultCollector fed by FrameScanner (property)', () => {
  it('decodes random result sets to the reference rows in both row modes however the stream is chunked', () => {
    fc.assert(
      fc.property(
        fc.array(resultSet, { minLength: 1, maxLength: 3 }),
        fc.constantFrom<RowMode>('object', 'array'),
        chunking,
        (sets, mode, { cuts, bytewise }) => {
          const bytes = backendReply(sets)
          const collector = new ResultCollector().reset(defaultParsers, mode)
          pushLikeEngine(new FrameScanner(collector), chunksOf(bytes, cuts, bytewise))
          expect(collector.error).toBeUndefined()
          expect(collector.txStatus).toBe(0x49)
          expect(collector.results).toHaveLength(sets.length)
          sets.forEach((set, i) => {
            const result = collector.results[i]!
            expect(result.command).toBe('SELECT')
            expect(result.rowCount).toBe(set.rows.length)
            expect(result.fields).toEqual(set.columns.map((c) => ({ name: c.name, dataTypeID: c.type })))
            expect(result.rows).toEqual(referenceRows(set.columns, set.rows, mode))
          })
        },
      ),
      { seed: SEED, numRuns: 1000 },
    )
  })

  it('keeps a column named __proto__ as an own property of an object-mode row, as PGlite does', () => {
    const columns = [
      { name: '__proto__', type: JSON_OID },
      { name: 'b', type: INT4 },
    ]
    const collector = new ResultCollector().reset(defaultParsers, 'object')
    new FrameScanner(collector).push(backendReply([{ columns, rows: [['{"polluted":true}', '2']] }]))
    const row = collector.results[0]!.rows[0] as Record<string, unknown>
    expect(Object.keys(row)).toEqual(['__proto__', 'b'])
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype)
    expect(row).toEqual(Object.fromEntries([['__proto__', { polluted: true }], ['b', 2]]))
  })
})

// --------------------------------------------- execProtocolRaw, mutated input

const FRONTEND_LETTERS = [...'BCdcfDEHFPpQSX'].map((c) => c.charCodeAt(0))

const BASE_MESSAGES: readonly Uint8Array[] = [
  serialize.query('select 1'),
  concat([
    serialize.parse({ text: 'select $1::int' }),
    serialize.bind({ values: ['7'] }),
    serialize.describe({ type: 'P' }),
    serialize.execute({}),
    serialize.sync(),
  ]),
  serialize.query("select 1 as a; select 'two' as b, 2.5::float8 as c; values (3), (4)"),
].map((m) => new Uint8Array(m))

/** Offsets of the frames of a well-formed message. */
function frameOffsets(message: Uint8Array): number[] {
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength)
  const offsets: number[] = []
  for (let i = 0; i + 5 <= message.length; i += 1 + view.getUint32(i + 1)) offsets.push(i)
  return offsets
}

type Mutation =
  | { kind: 'truncate'; at: number }
  | { kind: 'length'; frame: number; value: number }
  | { kind: 'flip'; at: number; xor: number }
  | { kind: 'type'; frame: number; byte: number }
  | { kind: 'append'; bytes: Uint8Array }
  | { kind: 'grow'; frame: number; by: number }

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('length' as const),
    frame: fc.nat(),
    value: fc.oneof(
      fc.integer({ min: 0, max: 3 }),
      fc.integer({ min: 4, max: 64 }),
      fc.constantFrom(0x7fffffff, 0x80000000, 0xfffffffc, 0xffffffff),
      fc.integer({ min: 0, max: 0xffffffff }),
      fc.integer({ min: -1000, max: -1 }).map((n) => n >>> 0),
    ),
  }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }),
  fc.record({
    kind: fc.constant('type' as const),
    frame: fc.nat(),
    byte: fc.oneof(fc.constantFrom(0, ...FRONTEND_LETTERS), fc.integer({ min: 0, max: 255 })),
  }),
  fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) }),
  fc.record({ kind: fc.constant('grow' as const), frame: fc.nat(), by: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 9000, max: 12000 })) }),
)

/** Applies mutations in order; frame indexes refer to the frames of the unmutated message. */
function mutate(base: Uint8Array, mutations: readonly Mutation[]): Uint8Array {
  let m: Uint8Array = base.slice()
  let offsets = frameOffsets(base)
  for (const mu of mutations) {
    switch (mu.kind) {
      case 'truncate':
        m = m.slice(0, mu.at % (m.length + 1))
        break
      case 'length': {
        const at = offsets[mu.frame % offsets.length]!
        if (at + 5 <= m.length) new DataView(m.buffer).setUint32(at + 1, mu.value)
        break
      }
      case 'flip':
        if (m.length > 0) m[mu.at % m.length]! ^= mu.xor
        break
      case 'type': {
        const at = offsets[mu.frame % offsets.length]!
        if (at < m.length) m[at] = mu.byte
        break
      }
      case 'append':
        m = concat([m, mu.bytes])
        break
      case 'grow': {
        // A valid frame with a longer body: the body is padded with zeros and the length fixed.
        const index = mu.frame % offsets.length
        const at = offsets[index]!
        if (at + 5 > m.length) break
        const length = new DataView(m.buffer).getUint32(at + 1)
        const end = Math.min(m.length, at + 1 + length)
        const grown = concat([m.subarray(0, end), new Uint8Array(mu.by), m.subarray(end)])
        new DataView(grown.buffer).setUint32(at + 1, (length + mu.by) >>> 0)
        m = grown
        offsets = offsets.map((o, i) => (i > index ? o + mu.by : o))
        break
      }
    }
  }
  return m
}

const mutatedMessage = fc.record({
  base: fc.nat({ max: BASE_MESSAGES.length - 1 }),
  mutations: fc.array(mutation, { minLength: 1, maxLength: 3 }),
})

describe('execProtocolRaw with mutated frontend messages (property, one instance)', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
  })
  afterAll(() => db.close())

  it('resolves or rejects with ProtocolError or DatabaseError, and the next query returns its row', async () => {
    await fc.assert(
      fc.asyncProperty(mutatedMessage, async ({ base, mutations }) => {
        const message = mutate(BASE_MESSAGES[base]!, mutations)
        const outcome = await db.execProtocolRaw(message).then(
          (bytes) => bytes,
          (error: unknown) => error,
        )
        let after: unknown
        try {
          after = (await db.query('select 1 as ok')).rows
        } catch (error) {
          after = error
        }
        if (db.closed) {
          // The engine died: later cases (and shrinking) need a live instance.
          await db.close().catch(() => {})
          db = await PGlite.create()
        }
        const label = `message ${hex(message)}`
        const acceptable =
          outcome instanceof Uint8Array || outcome instanceof ProtocolError || outcome instanceof DatabaseError
        expect(acceptable, `${label}: ${String(outcome)}`).toBe(true)
        expect(after, `${label}: next query`).toEqual([{ ok: 1 }])
      }),
      { seed: SEED, numRuns: 300 },
    )
  })
})

/** The outcome of one raw exec and of a query after it, on a fresh instance. */
async function runThenQuery(message: Uint8Array): Promise<{ outcome: unknown; after: unknown }> {
  const db = await PGlite.create()
  try {
    const outcome = await db.execProtocolRaw(message).then(
      (bytes) => bytes,
      (error: unknown) => error,
    )
    const after = await db.query('select 1 as ok').then(
      (r) => r.rows,
      (error: unknown) => error,
    )
    return { outcome, after }
  } finally {
    await db.close().catch(() => {})
  }
}

describe('execProtocolRaw with hostile but well-framed input', () => {
  it('keeps the instance usable after a bare Terminate message', async () => {
    const { outcome, after } = await runThenQuery(new Uint8Array(serialize.end()))
    expect(outcome).toBeInstanceOf(Uint8Array)
    expect(after).toEqual([{ ok: 1 }])
  })

  it('keeps the instance usable when a Terminate follows a Query in the same request', async () => {
    const { outcome, after } = await runThenQuery(concat([serialize.query('select 1'), serialize.end()]))
    expect(outcome instanceof Uint8Array || outcome instanceof ProtocolError, String(outcome)).toBe(true)
    expect(after).toEqual([{ ok: 1 }])
  })

  it('keeps the instance usable after a Terminate message with a body', async () => {
    const { outcome, after } = await runThenQuery(frame(0x58, new Uint8Array([0])))
    expect(outcome instanceof Uint8Array || outcome instanceof ProtocolError, String(outcome)).toBe(true)
    expect(after).toEqual([{ ok: 1 }])
  })

  it('keeps the instance usable after a Password message outside authentication', async () => {
    const { outcome, after } = await runThenQuery(new Uint8Array(serialize.password('secret')))
    expect(outcome instanceof Uint8Array || outcome instanceof ProtocolError, String(outcome)).toBe(true)
    expect(after).toEqual([{ ok: 1 }])
  })

  it('keeps the instance usable after a Sync message with a 10,001-byte body', async () => {
    const { outcome, after } = await runThenQuery(frame(0x53, new Uint8Array(10_001)))
    expect(outcome instanceof Uint8Array || outcome instanceof ProtocolError, String(outcome)).toBe(true)
    expect(after).toEqual([{ ok: 1 }])
  })

  it('rejects a 5-byte message that starts with a zero byte with ProtocolError and stays usable', async () => {
    const { outcome, after } = await runThenQuery(new Uint8Array([0, 0, 0, 0, 4]))
    expect(outcome).toBeInstanceOf(ProtocolError)
    expect(after).toEqual([{ ok: 1 }])
  })

  it('rejects a malformed startup packet without killing the instance', async () => {
    const { outcome, after } = await runThenQuery(new Uint8Array([0, 0, 0, 8, 1, 2, 3, 4]))
    expect(outcome instanceof Uint8Array || outcome instanceof ProtocolError, String(outcome)).toBe(true)
    expect(after).toEqual([{ ok: 1 }])
  })

  it('answers a query correctly after a raw Parse that failed without a Sync', async () => {
    // Parse with an empty body: the backend reports an error and then skips every message up to a Sync.
    const { outcome, after } = await runThenQuery(frame(0x50, new Uint8Array(0)))
    expect(outcome).toBeInstanceOf(Uint8Array)
    expect(after).toEqual([{ ok: 1 }])
  })
})
