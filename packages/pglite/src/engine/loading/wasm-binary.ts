/**
 * Just enough of the WebAssembly binary format to rewrite the engine and
 * its side modules in place (interrupt-polls.ts): sections, imports,
 * LEB128 numbers, and a module rebuilt with some sections replaced. Nothing
 * here decodes instructions.
 */

export const I32_CONST = 0x41
export const I32_LOAD = 0x28
export const CALL = 0x10
export const CALL_INDIRECT = 0x11
export const NOP = 0x01
export const END = 0x0b
export const GLOBAL_GET = 0x23
export const GLOBAL_SET = 0x24
export const I32_SUB = 0x6b
export const I32_EQZ = 0x45
export const IF = 0x04
export const DROP = 0x1a
export const VOID = 0x40
export const LOCAL_GET = 0x20
export const I32_AND = 0x71
export const I32_OR = 0x72
/** `i32.load` with 4-byte alignment and no offset. */
export const LOAD_ALIGNED = [I32_LOAD, 2, 0]
/** The function type `() -> i32`. */
export const RETURNS_I32 = [0x60, 0, 1, 0x7f]
/** The function type () -> (). */
export const RETURNS_NOTHING = [0x60, 0, 0]

export const SECTION_TYPE = 1
export const SECTION_IMPORT = 2
export const SECTION_FUNCTION = 3
export const SECTION_TABLE = 4
export const SECTION_GLOBAL = 6
export const SECTION_EXPORT = 7
export const SECTION_ELEMENT = 9
export const SECTION_CODE = 10

export interface Section {
  readonly id: number
  /** Where the section's header (its id byte) starts. */
  readonly header: number
  /** Where the section's payload starts and ends. */
  readonly start: number
  readonly end: number
}

const names = new TextDecoder()

export class Reader {
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
    // One decoder for every name: a new one per call made reading a side
    // module's 8,842 export names take ~40 ms.
    const text = names.decode(this.bytes.subarray(this.at, this.at + length))
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

export function wasmName(text: string): number[] {
  const bytes = new TextEncoder().encode(text)
  return [...uleb(bytes.length), ...bytes]
}

export function uleb(value: number): number[] {
  const out: number[] = []
  do {
    let byte = value & 0x7f
    value >>>= 7
    if (value !== 0) byte |= 0x80
    out.push(byte)
  } while (value !== 0)
  return out
}

export function sleb32(value: number): number[] {
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

export function sections(bytes: Uint8Array): Section[] {
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
export interface Imports {
  functions: number
  globals: number
  tables: number
  /** Function index of an imported function, by `module.field`. */
  functionIndex: Map<string, number>
  /** Global index of an imported global, by `module.field`. */
  globalIndex: Map<string, number>
}

export function readImports(bytes: Uint8Array, section: Section | undefined): Imports {
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
export function countOf(bytes: Uint8Array, section: Section | undefined): number {
  return section ? new Reader(bytes, section.start).uleb() : 0
}

/** A section of these payload parts: its header (id and size) and them. */
export function sectionOf(id: number, payload: readonly Uint8Array[]): Uint8Array[] {
  const size = payload.reduce((n, p) => n + p.byteLength, 0)
  return [Uint8Array.from([id, ...uleb(size)]), ...payload]
}

/** A section (header and payload) with `entries` appended, one entry each. */
export function grown(bytes: Uint8Array, section: Section, ...entries: (readonly number[])[]): Uint8Array[] {
  const reader = new Reader(bytes, section.start)
  const count = Uint8Array.from(uleb(reader.uleb() + entries.length))
  return sectionOf(section.id, [count, bytes.subarray(reader.at, section.end), ...entries.map((entry) => Uint8Array.from(entry))])
}

/** A module rebuilt from its sections, some replaced; returns it and where its code section's original entries lie. */
export function rebuild(input: Uint8Array, list: readonly Section[], replacements: ReadonlyMap<number, Uint8Array[]>): { bytes: Uint8Array<ArrayBuffer>; code: Uint8Array } {
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
export function functionBody(code: readonly number[]): number[] {
  const body = [0, ...code, END]
  return [...uleb(body.length), ...body]
}

