import {
  I32_CONST,
  CALL,
  CALL_INDIRECT,
  NOP,
  END,
  GLOBAL_GET,
  GLOBAL_SET,
  I32_SUB,
  I32_EQZ,
  IF,
  DROP,
  VOID,
  LOCAL_GET,
  I32_AND,
  I32_OR,
  LOAD_ALIGNED,
  RETURNS_I32,
  RETURNS_NOTHING,
  SECTION_TYPE,
  SECTION_IMPORT,
  SECTION_FUNCTION,
  SECTION_TABLE,
  SECTION_GLOBAL,
  SECTION_EXPORT,
  SECTION_ELEMENT,
  SECTION_CODE,
  Reader,
  countOf,
  functionBody,
  grown,
  readImports,
  rebuild,
  sectionOf,
  sections,
  sleb32,
  uleb,
  wasmName,
  type Section,
} from './wasm-binary.js'
import { UNTIMED_WAIT_EXPORT, UNTIMED_WAIT_LATCH_EXPORT } from '../backend/untimed-waits.js'

/**
 * Makes a statement that computes without calling out stoppable.
 *
 * Postgres checks for interrupts (`CHECK_FOR_INTERRUPTS()`, a read of
 * `InterruptPending`) inside every executor node, sort, hash, PL/pgSQL
 * statement and regex step. But on one thread nothing can set that flag
 * while the engine computes, and the host only gets control back where the
 * engine calls an import (alarms.ts): a cartesian join or `loop end loop`
 * never does, so no timeout or cancel could reach it.
 *
 * So before compiling, every read of `InterruptPending` in the engine's code
 * gets a countdown in front of it: a global is counted down at each check,
 * and once every {@link POLL_EVERY} checks a small function appended to the
 * module (the tick) calls the engine's own `emscripten_date_now` import,
 * which is where the host delivers alarms, deadlines and cancels
 * (alarms.ts). The flag is then read as the original code did. The
 * countdown is written inline, not as a call: Node 20's V8 does not inline
 * small wasm functions, and a call at each check cost CPU-bound statements
 * 4-15% against 2-9% inline (docs/engine.md). Function bodies grow (wasm
 * code refers to no byte offset of code); every index of the module stays
 * (the two functions, their types and the global are appended), so
 * function pointers and the static data stay where they were. The same
 * check as a function returning the flag (the poll function) is put in the
 * function table, one slot past the build's own entries, so that side
 * modules (PL/pgSQL's `loop end loop` lives in `plpgsql.so`) reach it:
 * their reads of the flag (through the `GOT.mem.InterruptPending` global)
 * become a call of an appended function that calls that slot.
 *
 * A single-threaded engine needs nothing else: no shared memory, no
 * watchdog thread, in every runtime (Node, browser pages with or without
 * cross-origin isolation, workers). What still runs to its end is what
 * Postgres itself does not interrupt: code between two checks (one huge
 * allocation or memcpy), and code that holds interrupts off
 * (`HOLD_INTERRUPTS()`, critical sections), where a flag set waits for the
 * next check that may act on it.
 */

/**
 * Interrupt checks between two polls of the host. The poll's JavaScript
 * call then costs nothing measurable next to the checks themselves, and
 * 512 checks take well under a millisecond in the loops measured (the
 * stops land 0.6-0.9 ms after a timeout; docs/engine.md).
 */
export const POLL_EVERY = 512

/** `WL_TIMEOUT` in Postgres' `waiteventset.h`: a WaitLatch without it waits until its latch is set. */
const WL_TIMEOUT = 8

/** The engine binary with its interrupt checks polling the host. */
export interface PolledEngine {
  readonly bytes: Uint8Array<ArrayBuffer>
  /** The reads of `InterruptPending` that now poll (466 in the pinned build). */
  readonly sites: number
  /** The function-table slot of the poll function, for side modules. */
  readonly pollSlot: number
}

/**
 * Rewrites the engine binary so that its interrupt checks poll the host
 * (see the file comment). Throws where the binary is not shaped as expected.
 */
export function addInterruptPolls(input: Uint8Array, every = POLL_EVERY): PolledEngine {
  const list = sections(input)
  const section = (id: number): Section => {
    const found = list.find((s) => s.id === id)
    if (!found) throw new Error(`the engine binary has no section ${id}`)
    return found
  }
  const imports = readImports(input, section(SECTION_IMPORT))
  const dateNow = imports.functionIndex.get('env.emscripten_date_now')
  if (dateNow === undefined) throw new Error('the engine binary does not import emscripten_date_now')

  // The global exported as InterruptPending holds the flag's address.
  let pendingGlobal = -1
  let waitLatch = -1
  {
    const reader = new Reader(input, section(SECTION_EXPORT).start)
    for (let n = reader.uleb(); n > 0; n--) {
      const field = reader.name()
      const kind = reader.u8()
      const index = reader.uleb()
      if (kind === 3 && field === 'InterruptPending') pendingGlobal = index
      if (kind === 0 && field === 'WaitLatch') waitLatch = index
    }
  }
  if (waitLatch < imports.functions) throw new Error('the engine binary does not export WaitLatch')
  if (pendingGlobal < imports.globals) throw new Error('the engine binary does not define InterruptPending')
  const definedGlobals = countOf(input, section(SECTION_GLOBAL))
  let interruptPending = -1
  {
    const reader = new Reader(input, section(SECTION_GLOBAL).start)
    reader.uleb()
    for (let i = 0; i < definedGlobals; i++) {
      reader.u8()
      reader.u8()
      if (imports.globals + i !== pendingGlobal) {
        reader.skipConstExpr()
        continue
      }
      if (reader.u8() !== I32_CONST) throw new Error('InterruptPending is not a constant address')
      interruptPending = reader.sleb32()
      if (reader.u8() !== END) throw new Error('InterruptPending is not a constant address')
    }
  }

  // Two functions are appended: the tick (the slow path of an inlined check)
  // and, last, the poll function that side modules call through the table.
  const defined = countOf(input, section(SECTION_FUNCTION))
  const tickFunction = imports.functions + defined
  const pollFunction = tickFunction + 1
  const types = countOf(input, section(SECTION_TYPE))
  const countdown = imports.globals + definedGlobals
  const waitGlobal = countdown + 1
  const waitLatchGlobal = countdown + 2
  const read = [I32_CONST, ...sleb32(interruptPending), ...LOAD_ALIGNED]
  // if (countdown == 0) tick(); countdown -= 1; then the read as it was
  const check = [
    GLOBAL_GET, ...uleb(countdown), I32_EQZ, IF, VOID, CALL, ...uleb(tickFunction), END,
    GLOBAL_GET, ...uleb(countdown), I32_CONST, 1, I32_SUB, GLOBAL_SET, ...uleb(countdown),
    ...read,
  ]

  // The poll function goes at the end of the first element segment (active,
  // table 0, at a constant offset); the table grows by the one slot.
  const element = section(SECTION_ELEMENT)
  const segment = firstSegment(input, element)
  if (!segment) throw new Error('the engine binary\'s first element segment is not a plain active one at a constant offset')
  const pollSlot = segment.offset + segment.entries
  const newElement = sectionOf(SECTION_ELEMENT, [
    Uint8Array.from([...uleb(segment.segments), 0, I32_CONST, ...sleb32(segment.offset), END, ...uleb(segment.entries + 1)]),
    input.subarray(segment.entriesStart, segment.entriesEnd),
    Uint8Array.from(uleb(pollFunction)),
    input.subarray(segment.entriesEnd, element.end),
  ])

  const table = section(SECTION_TABLE)
  const tables = new Reader(input, table.start)
  if (tables.uleb() !== 1 || tables.u8() !== 0x70) throw new Error('the engine binary does not define one function table')
  const limits = tables.uleb()
  const minimum = tables.uleb()
  const maximum = limits & 1 ? tables.uleb() : undefined
  if (maximum !== undefined && maximum <= pollSlot) throw new Error('the engine\'s function table cannot take the poll function')
  const tablePayload = [1, 0x70, limits, ...uleb(Math.max(minimum, pollSlot + 1)), ...(maximum === undefined ? [] : uleb(maximum))]

  // countdown = every; drop(emscripten_date_now())
  const tick = functionBody([I32_CONST, ...sleb32(every), GLOBAL_SET, ...uleb(countdown), CALL, ...uleb(dateNow), DROP])
  // The same check as a function returning the flag, for side modules.
  const poll = functionBody(check)
  // At WaitLatch's entry, for a wait with no timeout: note the latch and the
  // wait event (bit 31 set, so never 0) in the appended globals, and tick.
  const untimedWait = [
    LOCAL_GET, 1, I32_CONST, WL_TIMEOUT, I32_AND, I32_EQZ, IF, VOID,
    LOCAL_GET, 0, GLOBAL_SET, ...uleb(waitLatchGlobal),
    LOCAL_GET, 3, I32_CONST, ...sleb32(-0x80000000), I32_OR, GLOBAL_SET, ...uleb(waitGlobal),
    CALL, ...uleb(tickFunction),
    END,
  ]
  const entries = new Map([[waitLatch - imports.functions, untimedWait]])
  const { code, sites } = inlineChecks(input, section(SECTION_CODE), read, check, [tick, poll], entries)
  if (sites === 0) throw new Error('found no interrupt check in the engine binary')
  const replacements = new Map<number, Uint8Array[]>([
    [SECTION_TYPE, grown(input, section(SECTION_TYPE), RETURNS_I32, RETURNS_NOTHING)],
    [SECTION_FUNCTION, grown(input, section(SECTION_FUNCTION), uleb(types + 1), uleb(types))],
    [SECTION_TABLE, sectionOf(SECTION_TABLE, [Uint8Array.from(tablePayload)])],
    // mut i32 = every; the untimed wait's event and latch: mut i32 = 0
    [SECTION_GLOBAL, grown(input, section(SECTION_GLOBAL), [0x7f, 1, I32_CONST, ...sleb32(every), END], [0x7f, 1, I32_CONST, 0, END], [0x7f, 1, I32_CONST, 0, END])],
    [SECTION_EXPORT, grown(input, section(SECTION_EXPORT), [...wasmName(UNTIMED_WAIT_EXPORT), 3, ...uleb(waitGlobal)], [...wasmName(UNTIMED_WAIT_LATCH_EXPORT), 3, ...uleb(waitLatchGlobal)])],
    [SECTION_ELEMENT, newElement],
    [SECTION_CODE, code],
  ])
  const { bytes } = rebuild(input, list, replacements)
  return { bytes, sites, pollSlot }
}

/**
 * The code section with every `read` inside a function body replaced by
 * `check` (bodies grow; nothing in wasm code refers to a byte offset of
 * code, so only their sizes change), and `appended` bodies added.
 */
function inlineChecks(
  input: Uint8Array,
  code: Section,
  read: readonly number[],
  check: readonly number[],
  appended: readonly (readonly number[])[],
  entries: ReadonlyMap<number, readonly number[]>,
): { code: Uint8Array[]; sites: number } {
  const reader = new Reader(input, code.start)
  const count = reader.uleb()
  const parts: Uint8Array[] = [Uint8Array.from(uleb(count + appended.length))]
  const replacement = Uint8Array.from(check)
  const all = findReads(input, reader.at, code.end, read)
  let next = 0
  let sites = 0
  for (let i = 0; i < count; i++) {
    const sizeAt = reader.at
    const size = reader.uleb()
    const start = reader.at
    const end = start + size
    reader.at = end
    const found: number[] = []
    while (next < all.length && all[next]! < end) {
      const at = all[next++]!
      if (at >= start && at + read.length <= end) found.push(at)
    }
    const entry = entries.get(i)
    if (found.length === 0 && !entry) {
      parts.push(input.subarray(sizeAt, end))
      continue
    }
    sites += found.length
    parts.push(Uint8Array.from(uleb(size + found.length * (check.length - read.length) + (entry?.length ?? 0))))
    let from = start
    if (entry) {
      // After the body's local declarations: its first instruction.
      const locals = new Reader(input, start)
      for (let groups = locals.uleb(); groups > 0; groups--) {
        locals.uleb()
        locals.u8()
      }
      parts.push(input.subarray(start, locals.at), Uint8Array.from(entry))
      from = locals.at
    }
    for (const at of found) {
      parts.push(input.subarray(from, at), replacement)
      from = at + read.length
    }
    parts.push(input.subarray(from, end))
  }
  for (const body of appended) parts.push(Uint8Array.from(body))
  return { code: sectionOf(SECTION_CODE, parts), sites }
}

/**
 * Where `read` occurs in `bytes[start, end)`. The search anchors on the
 * read's first address byte, which is rare in code (about 11,000 times in
 * 9 MB, against 500,000 for the `i32.const` opcode), so the native
 * `indexOf` does most of the work: a few ms for the engine.
 */
function findReads(bytes: Uint8Array, start: number, end: number, read: readonly number[]): number[] {
  const found: number[] = []
  const anchor = read[1] as number
  for (let at = bytes.indexOf(anchor, start + 1); at >= 0 && at < end; at = bytes.indexOf(anchor, at + 1)) {
    const from = at - 1
    if (from + read.length > end) break
    let same = true
    for (let k = 0; k < read.length; k++) {
      if (bytes[from + k] !== read[k]) {
        same = false
        break
      }
    }
    if (!same) continue
    found.push(from)
    at = from + read.length - 1
  }
  return found
}

/**
 * The poll slot of a binary {@link addInterruptPolls} made (the package
 * build ships one); undefined for a binary it did not make, whose last
 * element is not its last function.
 */
export function pollSlotOf(bytes: Uint8Array): number | undefined {
  const list = sections(bytes)
  const find = (id: number): Section | undefined => list.find((s) => s.id === id)
  const element = find(SECTION_ELEMENT)
  const segment = element && firstSegment(bytes, element)
  if (!segment) return undefined
  const lastFunction = readImports(bytes, find(SECTION_IMPORT)).functions + countOf(bytes, find(SECTION_FUNCTION)) - 1
  return segment.last === lastFunction ? segment.offset + segment.entries - 1 : undefined
}

/** The first element segment, where it is active, for table 0, at a constant offset (flags 0). */
function firstSegment(bytes: Uint8Array, element: Section): { segments: number; offset: number; entries: number; entriesStart: number; entriesEnd: number; last: number } | undefined {
  const reader = new Reader(bytes, element.start)
  const segments = reader.uleb()
  if (reader.u8() !== 0 || reader.u8() !== I32_CONST) return undefined
  const offset = reader.sleb32()
  if (reader.u8() !== END) return undefined
  const entries = reader.uleb()
  const entriesStart = reader.at
  let last = -1
  for (let i = 0; i < entries; i++) last = reader.uleb()
  return { segments, offset, entries, entriesStart, entriesEnd: reader.at, last }
}

const polledSideModules = new WeakMap<Uint8Array, Uint8Array>()

/**
 * A side module whose reads of `InterruptPending` call the engine's poll
 * function at `pollSlot` of the shared function table (see the file
 * comment). A module that does not import the flag comes back as it is.
 * Cached by the input array: every instance of a process shares the result.
 */
export function pollingSideModule(input: Uint8Array, pollSlot: number): Uint8Array {
  let out = polledSideModules.get(input)
  if (out) return out
  out = rewriteSideModule(input, pollSlot)
  polledSideModules.set(input, out)
  return out
}

function rewriteSideModule(input: Uint8Array, pollSlot: number): Uint8Array {
  const list = sections(input)
  const find = (id: number): Section | undefined => list.find((s) => s.id === id)
  const imports = readImports(input, find(SECTION_IMPORT))
  const flag = imports.globalIndex.get('GOT.mem.InterruptPending')
  const types = find(SECTION_TYPE)
  const functions = find(SECTION_FUNCTION)
  const code = find(SECTION_CODE)
  if (flag === undefined || !types || !functions || !code || find(SECTION_TABLE)) return input
  const read = [GLOBAL_GET, ...uleb(flag), ...LOAD_ALIGNED]
  const pollFunction = imports.functions + countOf(input, functions)
  const call = [CALL, ...uleb(pollFunction)]
  if (call.length > read.length) return input
  const typeIndex = countOf(input, types)
  // i32.const pollSlot; call_indirect (type () -> i32) (table 0)
  const body = functionBody([I32_CONST, ...sleb32(pollSlot), CALL_INDIRECT, ...uleb(typeIndex), 0])
  const replacements = new Map([
    [SECTION_TYPE, grown(input, types, RETURNS_I32)],
    [SECTION_FUNCTION, grown(input, functions, uleb(typeIndex))],
    [SECTION_CODE, grown(input, code, body)],
  ])
  // A module with no function pointers of its own does not import the table: it
  // gets the import (table 0: no other index moves), which the loader answers
  // with the engine's table as for any side module.
  const imported = find(SECTION_IMPORT)
  if (imports.tables === 0 && imported) replacements.set(SECTION_IMPORT, grown(input, imported, [...wasmName('env'), ...wasmName('__indirect_function_table'), 1, 0x70, 0, 0]))
  const { bytes, code: entries } = rebuild(input, list, replacements)
  return patchReads(entries, read, call) === 0 ? input : bytes
}

/** Replaces each `read` in `code` by `call` padded with `nop`s (the side modules' reads: their code keeps its size). */
function patchReads(code: Uint8Array, read: readonly number[], call: readonly number[]): number {
  const found = findReads(code, 0, code.length, read)
  for (const from of found) {
    code.set(call, from)
    code.fill(NOP, from + call.length, from + read.length)
  }
  return found.length
}
