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
 * is replaced by a call to one small function added to the module: it
 * counts down a global and, once every {@link POLL_EVERY} checks, calls the
 * engine's own `emscripten_date_now` import, which is where the host
 * delivers alarms, deadlines and cancels (alarms.ts). It then reads the flag
 * as the original code did. The rewrite keeps every byte length and every
 * index of the module (the call is padded with `nop` to the width of the
 * read it replaces; the function, its type and its global are appended), so
 * function pointers and the static data stay where they were. The function
 * is also put in the function table, one slot past the build's own entries,
 * so that side modules (PL/pgSQL's `loop end loop` lives in `plpgsql.so`)
 * reach it: their reads of the flag (through the `GOT.mem.InterruptPending`
 * global) become a call of an appended function that calls that slot.
 *
 * A single-threaded engine needs nothing else: no shared memory, no
 * watchdog thread, in every runtime (Node, browser pages with or without
 * cross-origin isolation, workers). What still runs to its end is what
 * Postgres itself does not interrupt: code between two checks (one huge
 * allocation or memcpy), and code that holds interrupts off
 * (`HOLD_INTERRUPTS()`, critical sections), where a flag set waits for the
 * next check that may act on it.
 */

/** Interrupt checks between two polls of the host: see docs/engine.md for how it was chosen. */
export const POLL_EVERY = 512

const I32_CONST = 0x41
const I32_LOAD = 0x28
const CALL = 0x10
const CALL_INDIRECT = 0x11
const NOP = 0x01
const END = 0x0b
const GLOBAL_GET = 0x23
const GLOBAL_SET = 0x24
const I32_SUB = 0x6b
const I32_EQZ = 0x45
const IF = 0x04
const DROP = 0x1a
const VOID = 0x40
/** `i32.load` with 4-byte alignment and no offset. */
const LOAD_ALIGNED = [I32_LOAD, 2, 0]
/** The function type `() -> i32`. */
const RETURNS_I32 = [0x60, 0, 1, 0x7f]

const SECTION_TYPE = 1
const SECTION_IMPORT = 2
const SECTION_FUNCTION = 3
const SECTION_TABLE = 4
const SECTION_GLOBAL = 6
const SECTION_EXPORT = 7
const SECTION_ELEMENT = 9
const SECTION_CODE = 10

/** The engine binary with its interrupt checks polling the host. */
export interface PolledEngine {
  readonly bytes: Uint8Array<ArrayBuffer>
  /** The reads of `InterruptPending` that now poll (466 in the pinned build). */
  readonly sites: number
  /** The function-table slot of the poll function, for side modules. */
  readonly pollSlot: number
}

interface Section {
  readonly id: number
  /** Where the section's header (its id byte) starts. */
  readonly header: number
  /** Where the section's payload starts and ends. */
  readonly start: number
  readonly end: number
}

class Reader {
  constructor(
    readonly bytes: Uint8Array,
    public at = 0,
  ) {}

  u8(): number {
    const byte = this.bytes[this.at++]
    if (byte === undefined) throw new Error('unexpected end of the engine binary')
    return byte
  }

  uleb(): number {
    let result = 0
    let shift = 0
    for (;;) {
      const byte = this.u8()
      result += (byte & 0x7f) * 2 ** shift
      if ((byte & 0x80) === 0) return result
      shift += 7
    }
  }

  sleb32(): number {
    let result = 0
    let shift = 0
    let byte: number
    do {
      byte = this.u8()
      result |= (byte & 0x7f) << shift
      shift += 7
    } while (byte & 0x80)
    return shift < 32 && byte & 0x40 ? result | (-1 << shift) : result
  }

  name(): string {
    const length = this.uleb()
    const text = new TextDecoder().decode(this.bytes.subarray(this.at, this.at + length))
    this.at += length
    return text
  }

  /** Skips a constant expression (a global's initial value). */
  skipConstExpr(): void {
    for (;;) {
      const op = this.u8()
      if (op === END) return
      if (op === I32_CONST) this.sleb32()
      else if (op === 0x42) this.skipLeb()
      else if (op === 0x43) this.at += 4
      else if (op === 0x44) this.at += 8
      else if (op === GLOBAL_GET || op === 0xd2) this.uleb()
      else if (op === 0xd0) this.u8()
      else throw new Error(`unexpected opcode 0x${op.toString(16)} in a constant expression`)
    }
  }

  skipLeb(): void {
    while (this.u8() & 0x80);
  }
}

function wasmName(text: string): number[] {
  const bytes = new TextEncoder().encode(text)
  return [...uleb(bytes.length), ...bytes]
}

function uleb(value: number): number[] {
  const out: number[] = []
  do {
    let byte = value & 0x7f
    value >>>= 7
    if (value !== 0) byte |= 0x80
    out.push(byte)
  } while (value !== 0)
  return out
}

function sleb32(value: number): number[] {
  const out: number[] = []
  for (;;) {
    const byte = value & 0x7f
    value >>= 7
    if ((value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0)) {
      out.push(byte)
      return out
    }
    out.push(byte | 0x80)
  }
}

function sections(bytes: Uint8Array): Section[] {
  const reader = new Reader(bytes, 8)
  const found: Section[] = []
  while (reader.at < bytes.length) {
    const header = reader.at
    const id = reader.u8()
    const size = reader.uleb()
    found.push({ id, header, start: reader.at, end: reader.at + size })
    reader.at += size
  }
  return found
}

/** What a module imports, as far as the rewrite needs it. */
interface Imports {
  functions: number
  globals: number
  tables: number
  /** Function index of an imported function, by `module.field`. */
  functionIndex: Map<string, number>
  /** Global index of an imported global, by `module.field`. */
  globalIndex: Map<string, number>
}

function readImports(bytes: Uint8Array, section: Section | undefined): Imports {
  const found: Imports = { functions: 0, globals: 0, tables: 0, functionIndex: new Map(), globalIndex: new Map() }
  if (!section) return found
  const reader = new Reader(bytes, section.start)
  for (let n = reader.uleb(); n > 0; n--) {
    const name = `${reader.name()}.${reader.name()}`
    const kind = reader.u8()
    if (kind === 0) {
      reader.uleb()
      found.functionIndex.set(name, found.functions++)
    } else if (kind === 1 || kind === 2) {
      if (kind === 1) {
        reader.u8()
        found.tables++
      }
      const flags = reader.uleb()
      reader.uleb()
      if (flags & 1) reader.uleb()
    } else if (kind === 3) {
      reader.u8()
      reader.u8()
      found.globalIndex.set(name, found.globals++)
    } else {
      reader.uleb()
    }
  }
  return found
}

/** The count of entries a vector section holds (0 where the section is absent). */
function countOf(bytes: Uint8Array, section: Section | undefined): number {
  return section ? new Reader(bytes, section.start).uleb() : 0
}

/** A section (header and payload) with one entry, `entry`, appended. */
function grown(bytes: Uint8Array, section: Section, entry: readonly number[]): Uint8Array[] {
  const reader = new Reader(bytes, section.start)
  const count = uleb(reader.uleb() + 1)
  const entries = bytes.subarray(reader.at, section.end)
  const size = count.length + entries.byteLength + entry.length
  return [Uint8Array.from([section.id, ...uleb(size), ...count]), entries, Uint8Array.from(entry)]
}

/** A module rebuilt from its sections, some replaced; returns it and where its code section's original entries lie. */
function rebuild(input: Uint8Array, list: readonly Section[], replacements: ReadonlyMap<number, Uint8Array[]>): { bytes: Uint8Array<ArrayBuffer>; code: Uint8Array } {
  let size = input.byteLength
  for (const s of list) {
    const parts = replacements.get(s.id)
    if (parts) size += parts.reduce((n, p) => n + p.byteLength, 0) - (s.end - s.header)
  }
  const bytes = new Uint8Array(size)
  bytes.set(input.subarray(0, 8))
  let offset = 8
  let code = bytes.subarray(0, 0)
  for (const s of list) {
    const parts = replacements.get(s.id) ?? [input.subarray(s.header, s.end)]
    const from = offset
    for (const part of parts) {
      bytes.set(part, offset)
      offset += part.byteLength
    }
    // The appended function reads the flag itself: only the original entries are patched.
    if (s.id === SECTION_CODE) code = bytes.subarray(from, offset - (replacements.has(s.id) ? (parts.at(-1)?.byteLength ?? 0) : 0))
  }
  return { bytes, code }
}

/** A function body: no locals, `code`, end. */
function functionBody(code: readonly number[]): number[] {
  const body = [0, ...code, END]
  return [...uleb(body.length), ...body]
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
  {
    const reader = new Reader(input, section(SECTION_EXPORT).start)
    for (let n = reader.uleb(); n > 0; n--) {
      const field = reader.name()
      const kind = reader.u8()
      const index = reader.uleb()
      if (kind === 3 && field === 'InterruptPending') pendingGlobal = index
    }
  }
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

  const pollFunction = imports.functions + countOf(input, section(SECTION_FUNCTION))
  const countdown = imports.globals + definedGlobals
  const read = [I32_CONST, ...sleb32(interruptPending), ...LOAD_ALIGNED]
  const call = [CALL, ...uleb(pollFunction)]

  // The poll function goes at the end of the first element segment (active,
  // table 0, at a constant offset); the table grows by the one slot.
  const element = section(SECTION_ELEMENT)
  const elements = new Reader(input, element.start)
  const segments = elements.uleb()
  if (elements.u8() !== 0 || elements.u8() !== I32_CONST) throw new Error('the engine binary\'s first element segment is not a plain active one')
  const segmentOffset = elements.sleb32()
  if (elements.u8() !== END) throw new Error('the engine binary\'s first element segment is not at a constant offset')
  const countAt = elements.at
  const entries = elements.uleb()
  for (let i = 0; i < entries; i++) elements.uleb()
  const pollSlot = segmentOffset + entries
  const newElement = [
    Uint8Array.from([SECTION_ELEMENT]),
    new Uint8Array(0), // size, below
    Uint8Array.from([...uleb(segments), 0, I32_CONST, ...sleb32(segmentOffset), END, ...uleb(entries + 1)]),
    input.subarray(countAt + uleb(entries).length, elements.at),
    Uint8Array.from(uleb(pollFunction)),
    input.subarray(elements.at, element.end),
  ]
  newElement[1] = Uint8Array.from(uleb(newElement.slice(2).reduce((n, p) => n + p.byteLength, 0)))

  const table = section(SECTION_TABLE)
  const tables = new Reader(input, table.start)
  if (tables.uleb() !== 1 || tables.u8() !== 0x70) throw new Error('the engine binary does not define one function table')
  const limits = tables.uleb()
  const minimum = tables.uleb()
  const maximum = limits & 1 ? tables.uleb() : undefined
  if (maximum !== undefined && maximum <= pollSlot) throw new Error('the engine\'s function table cannot take the poll function')
  const tablePayload = [1, 0x70, limits, ...uleb(Math.max(minimum, pollSlot + 1)), ...(maximum === undefined ? [] : uleb(maximum))]

  // countdown -= 1; if (countdown == 0) { countdown = every; drop(emscripten_date_now()) } return InterruptPending
  const body = functionBody([
    GLOBAL_GET, ...uleb(countdown), I32_CONST, 1, I32_SUB, GLOBAL_SET, ...uleb(countdown),
    GLOBAL_GET, ...uleb(countdown), I32_EQZ,
    IF, VOID,
    I32_CONST, ...sleb32(every), GLOBAL_SET, ...uleb(countdown),
    CALL, ...uleb(dateNow), DROP,
    END,
    ...read,
  ])
  const replacements = new Map<number, Uint8Array[]>([
    [SECTION_TYPE, grown(input, section(SECTION_TYPE), RETURNS_I32)],
    [SECTION_FUNCTION, grown(input, section(SECTION_FUNCTION), uleb(countOf(input, section(SECTION_TYPE))))],
    [SECTION_TABLE, [Uint8Array.from([SECTION_TABLE, ...uleb(tablePayload.length), ...tablePayload])]],
    // mut i32 = every
    [SECTION_GLOBAL, grown(input, section(SECTION_GLOBAL), [0x7f, 1, I32_CONST, ...sleb32(every), END])],
    [SECTION_ELEMENT, newElement],
    [SECTION_CODE, grown(input, section(SECTION_CODE), body)],
  ])
  const { bytes, code } = rebuild(input, list, replacements)
  const sites = patchReads(code, read, call)
  if (sites === 0) throw new Error('found no interrupt check in the engine binary')
  return { bytes, sites, pollSlot }
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
  if (!element) return undefined
  const lastFunction = readImports(bytes, find(SECTION_IMPORT)).functions + countOf(bytes, find(SECTION_FUNCTION)) - 1
  const reader = new Reader(bytes, element.start)
  reader.uleb()
  if (reader.u8() !== 0 || reader.u8() !== I32_CONST) return undefined
  const offset = reader.sleb32()
  if (reader.u8() !== END) return undefined
  const entries = reader.uleb()
  let last = -1
  for (let i = 0; i < entries; i++) last = reader.uleb()
  return last === lastFunction ? offset + entries - 1 : undefined
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

/**
 * Replaces each `read` in `code` by `call` padded with `nop`s. The search
 * anchors on the read's first address byte, which is rare in code (about
 * 11,000 times in 9 MB, against 500,000 for the `i32.const` opcode), so
 * the native `indexOf` does most of the work: about 3 ms for the engine.
 */
function patchReads(code: Uint8Array, read: readonly number[], call: readonly number[]): number {
  let sites = 0
  const anchor = read[1] as number
  for (let at = code.indexOf(anchor, 1); at >= 0; at = code.indexOf(anchor, at + 1)) {
    const from = at - 1
    let same = true
    for (let k = 0; k < read.length; k++) {
      if (code[from + k] !== read[k]) {
        same = false
        break
      }
    }
    if (!same) continue
    code.set(call, from)
    code.fill(NOP, from + call.length, from + read.length)
    sites++
    at = from + read.length - 1
  }
  return sites
}
