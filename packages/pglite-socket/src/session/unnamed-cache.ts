import { Frontend } from '@pgwasm/pglite/protocol'
import { maxFrontendMessageBytes } from '@pgwasm/pglite'
import { mayNeedInspection } from '../sql/listen.js'
import { copyOut, readInt32 } from '../wire/wire.js'
import { mentions } from '../sql/byte-scan.js'

const utf8 = new TextEncoder()
// WHATWG's latin1 is windows-1252: still one char per byte and one byte per char, so a faithful map key.
const latin1 = new TextDecoder('latin1')
/** Statements one client may have cached; later SQL runs as sent. */
const MAX_ENTRIES = 256
/**
 * Larger batches run as sent: each entry keeps its SQL as a key, and a
 * rewritten batch is kept whole until it has bound.
 */
const MAX_BATCH_BYTES = 65_536
/** ParseComplete, sent for a Parse the engine never saw. */
export const PARSE_COMPLETE: Uint8Array = new Uint8Array([0x31 /* 1 */, 0, 0, 0, 4])

/** A cached statement: its name on the engine, encoded once. */
export interface CachedStatement {
  readonly name: string
  readonly nameBytes: Uint8Array
  /** The Parse body after the name (SQL, parameter types), as a map key and as bytes. */
  readonly key: string
  readonly keyBytes: Uint8Array
  /** Whether the engine holds it (its Parse succeeded cleanly). */
  ready: boolean
  /** The multiplexer's cache epoch when it was parsed; trusted only while that holds. */
  epoch: number
  /** The engine's `catalogChanges` when it was parsed: DDL since, however it ran, means parse again. */
  catalog: number
}

/** A batch rewritten to use a cached statement instead of the unnamed one. */
export interface CachePlan {
  /** 'create' parses the SQL under the cache name; 'reuse' drops the Parse and binds the cached one. */
  readonly kind: 'create' | 'reuse'
  readonly entry: CachedStatement
  /** What goes to the engine. */
  readonly message: Uint8Array
  /** The batch as the client sent it, to run instead if a 'reuse' fails before BindComplete. */
  readonly original: Uint8Array
}

/**
 * Turns a client's repeated `Parse` of the unnamed statement (what `pg` sends
 * for every query with parameters) into a Bind of a named statement the
 * server prepared on the engine the first time: Postgres then skips parse
 * analysis, and planning once it settles on a generic plan (70 us -> 16 us
 * per select by primary key here).
 *
 * Only a batch that is exactly one sequence `Parse(unnamed)` + Bind / Describe
 * / Execute of the unnamed statement and portal + `Sync`, from a client
 * outside a transaction block, is rewritten. What Postgres's plan cache does
 * not re-check (a new table that hides the one a statement named, a setting
 * that changes how literals are read) moves the multiplexer's cache epoch
 * on (see Session), and statements of an older epoch are parsed again.
 * Postgres's plan cache re-checks the rest (schema changes of the tables
 * used, `search_path`); whatever it refuses
 * (`cached plan must not change result type`, a dropped table, a statement
 * removed by `DISCARD ALL` / `DEALLOCATE`) fails before BindComplete, when
 * nothing has run and the implicit transaction is rolled back: the session
 * then drops the entry and runs the batch as the client sent it, so the
 * client sees exactly what Postgres would have sent. A Parse that fails, or
 * reports a notice, is not cached.
 */
export class UnnamedStatementCache {
  readonly #prefix: string
  readonly #entries = new Map<string, CachedStatement>()
  /** SQL that must be parsed each time (its Parse sent a notice). */
  readonly #refused = new Set<string>()
  #next = 1
  #last: CachedStatement | undefined
  readonly #maxMessageBytes: number

  constructor(prefix: string, maxMessageBytes: number) {
    // `.` never follows the prefix in a renamed client name (those get `_`).
    this.#prefix = `${prefix}.u`
    this.#maxMessageBytes = maxMessageBytes
  }

  /**
   * The rewrite of `bytes[start, end)` when it is one eligible sequence, or
   * undefined (then it runs as usual). Frames that are not whole and valid
   * are left to the normal path, which reports them.
   */
  plan(bytes: Uint8Array, start: number, end: number): CachePlan | undefined {
    if (end - start < 5 || end - start > MAX_BATCH_BYTES || bytes[start] !== Frontend.Parse || bytes[start + 5] !== 0) return undefined
    // Frames: Parse first, Sync last, in between only Bind/Describe/Execute of the unnamed ones.
    let at = start
    let parseEnd = 0
    let binds = 0
    let describeStatementAt = -1
    let bindAt = -1
    for (;;) {
      if (end - at < 5) return undefined
      const type = bytes[at]!
      const length = readInt32(bytes, at + 1) >>> 0
      if (length < 4 || length > Math.min(maxFrontendMessageBytes(type), this.#maxMessageBytes)) return undefined
      const next = at + 1 + length
      if (next > end) return undefined
      if (at === start) {
        parseEnd = next
      } else {
        switch (type) {
          case Frontend.Bind:
            if (length < 6 || bytes[at + 5] !== 0 || bytes[at + 6] !== 0 || ++binds > 1) return undefined
            bindAt = at
            break
          case Frontend.Describe:
            if (length < 6 || bytes[at + 6] !== 0) return undefined
            if (bytes[at + 5] === 0x53 /* S */) {
              if (describeStatementAt >= 0) return undefined
              describeStatementAt = at
            } else if (bytes[at + 5] !== 0x50 /* P */) return undefined
            break
          case Frontend.Execute:
            if (length < 5 || bytes[at + 5] !== 0) return undefined
            break
          case Frontend.Sync:
            // Without a Bind the reply would hold no BindComplete to tell a good run by.
            if (next !== end || bindAt < 0) return undefined
            return this.#rewrite(bytes, start, parseEnd, end, bindAt, describeStatementAt)
          default:
            return undefined
        }
      }
      at = next
    }
  }

  #rewrite(bytes: Uint8Array, start: number, parseEnd: number, end: number, bindAt: number, describeAt: number): CachePlan | undefined {
    const sqlStart = start + 6
    // A client repeats one query most of the time: compare with the last one before any map lookup.
    let entry = this.#last !== undefined && sameBytes(bytes, sqlStart, parseEnd, this.#last.keyBytes) ? this.#last : undefined
    if (!entry) {
      const sqlEnd = bytes.indexOf(0, sqlStart)
      if (sqlEnd < 0 || sqlEnd >= parseEnd) return undefined
      // LISTEN, COPY, DISCARD, DROP DATABASE...: the session must see those run as sent;
      // DEALLOCATE would drop the cached statements as they run.
      if (mayNeedInspection(bytes, sqlStart, sqlEnd) || mentions(bytes, sqlStart, sqlEnd, DEALLOCATE) || sqlMayChangeMeaning(bytes, sqlStart, sqlEnd)) {
        return undefined
      }
      // SQL text, parameter count and types: latin1 maps each byte to one char, no decoding.
      const key = latin1.decode(bytes.subarray(sqlStart, parseEnd))
      if (this.#refused.has(key)) return undefined
      entry = this.#entries.get(key)
      if (!entry) {
        if (this.#entries.size >= MAX_ENTRIES) return undefined
        const name = `${this.#prefix}${this.#next++}`
        entry = { name, nameBytes: utf8.encode(name), key, keyBytes: bytes.slice(sqlStart, parseEnd), ready: false, epoch: -1, catalog: -1 }
        this.#entries.set(key, entry)
      } else if (!entry.ready) {
        return undefined
      }
    } else if (!entry.ready) {
      return undefined
    }
    this.#last = entry
    const kind = entry.ready ? 'reuse' : 'create'
    const name = entry.nameBytes
    const extra = name.length
    // Each rewritten frame gains the name's bytes: Parse (create), Bind, Describe S.
    const grow = (kind === 'create' ? extra : start - parseEnd) + (bindAt >= 0 ? extra : 0) + (describeAt >= 0 ? extra : 0)
    const out = Buffer.allocUnsafe(end - start + grow)
    let o = 0
    let at = kind === 'create' ? start : parseEnd
    while (at < end) {
      const length = readInt32(bytes, at + 1) >>> 0
      const next = at + 1 + length
      // The empty name whose NUL the name goes before: Parse's statement, Bind's statement, Describe S's.
      const nameAt = at === start ? at + 5 : at === bindAt || at === describeAt ? at + 6 : -1
      if (nameAt < 0) {
        o = copyBytes(bytes, at, next, out, o)
      } else {
        out[o] = bytes[at]!
        writeInt32(out, o + 1, length + extra)
        o = copyBytes(bytes, at + 5, nameAt, out, o + 5)
        o = copyBytes(name, 0, extra, out, o)
        o = copyBytes(bytes, nameAt, next, out, o)
      }
      at = next
    }
    const original = kind === 'reuse' ? copyOut(bytes, start, end) : out
    return { kind, entry, message: out, original }
  }

  /** The statement of a 'create' plan exists on the engine and may be reused. */
  created(plan: CachePlan): void {
    plan.entry.ready = true
  }

  /** The Parse of a 'create' plan failed (nothing was created) or sent notices (never cache it). */
  refuse(plan: CachePlan, forever: boolean): void {
    this.#forget(plan.entry)
    if (forever && this.#refused.size < MAX_ENTRIES) this.#refused.add(plan.entry.key)
  }

  /** Forgets a statement the engine refused to bind; the caller closes it there. */
  evict(plan: CachePlan): void {
    this.#forget(plan.entry)
  }

  #forget(entry: CachedStatement): void {
    if (this.#entries.get(entry.key) === entry) this.#entries.delete(entry.key)
    if (this.#last === entry) this.#last = undefined
  }
}

function sameBytes(bytes: Uint8Array, from: number, to: number, other: Uint8Array): boolean {
  if (to - from !== other.length) return false
  for (let i = 0; i < other.length; i++) if (bytes[from + i] !== other[i]) return false
  return true
}

/** Copies `from[start, end)` to `to` at `at`; returns the offset after it. A loop beats `set(subarray)` for the few bytes of a frame. */
function copyBytes(from: Uint8Array, start: number, end: number, to: Uint8Array, at: number): number {
  if (end - start > 64) {
    to.set(from.subarray(start, end), at)
    return at + end - start
  }
  for (let i = start; i < end; i++) to[at++] = from[i]!
  return at
}

function writeInt32(to: Uint8Array, at: number, value: number): void {
  to[at] = value >>> 24
  to[at + 1] = (value >>> 16) & 255
  to[at + 2] = (value >>> 8) & 255
  to[at + 3] = value & 255
}

const DEALLOCATE = 'deallocate'

/**
 * Whether SQL in `bytes[from, to)` may change what later SQL means although
 * its command tag reads `SELECT n`, which the output alone would not
 * reveal: CREATE TABLE AS and SELECT INTO (any `create`, and `into` outside
 * INSERT and MERGE), and `set_config()` (this engine sends no
 * ParameterStatus). A byte scan; false positives only cost a new Parse of
 * cached statements.
 */
export function sqlMayChangeMeaning(bytes: Uint8Array, from: number, to: number): boolean {
  if (mentions(bytes, from, to, 'create') || mentions(bytes, from, to, 'set_config')) return true
  return mentions(bytes, from, to, 'into') && !mentions(bytes, from, to, 'insert') && !mentions(bytes, from, to, 'merge')
}
