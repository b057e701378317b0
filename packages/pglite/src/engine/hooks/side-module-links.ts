import { Reader, SECTION_EXPORT, SECTION_IMPORT, SECTION_TYPE, sections } from '../loading/wasm-binary.js'

/** A JavaScript function a side module calls in place of a C one: integers in, an integer (or nothing) out. */
export type ImportedFunction = (...args: number[]) => number | undefined

/**
 * What a side module (a `.so` of the engine, or of an extension) needs from
 * the modules loaded before it, as the glue's loader links it: the
 * functions it imports, the addresses it takes through its `GOT.func` and
 * `GOT.mem` globals, what it exports itself, and, from its `dylink.0`
 * section, the libraries it names as needed and the imports it marks weak.
 */
export interface SideModuleLinks {
  /** Functions imported from `env` (or WASI), by name, with the glue's signature string (`iii` is (i32, i32) -> i32). */
  readonly functions: ReadonlyMap<string, string>
  /** Symbols whose function address the module takes. */
  readonly functionAddresses: readonly string[]
  /** Symbols whose data address the module takes. */
  readonly dataAddresses: readonly string[]
  readonly exports: ReadonlySet<string>
  /** Libraries the loader loads first (dylink.0's needed list). */
  readonly needed: readonly string[]
  /** Imports that may stay undefined. */
  readonly weak: ReadonlySet<string>
}

/** dylink.0's subsections (emscripten's dynamic linking ABI). */
const DYLINK_NEEDED = 2
const DYLINK_IMPORT_INFO = 4
/** A symbol's binding bits, and the one meaning weak. */
const BINDING_MASK = 3
const BINDING_WEAK = 1

const KIND_FUNCTION = 0
const KIND_TABLE = 1
const KIND_MEMORY = 2
const KIND_GLOBAL = 3
const FUNCTION_TYPE = 0x60
const REF = 0x64
const REF_NULL = 0x63

/** The glue's signature letters for the value types a C function can take or return on wasm32. */
const SIGNATURE_LETTER: Readonly<Record<number, string>> = { 0x7f: 'i', 0x7e: 'j', 0x7d: 'f', 0x7c: 'd' }

/**
 * Reads a side module's links; undefined where its bytes are not a module
 * this reader understands (the loader then deals with it as before).
 */
export function readSideModuleLinks(bytes: Uint8Array): SideModuleLinks | undefined {
  try {
    return read(bytes)
  } catch {
    return undefined
  }
}

function read(bytes: Uint8Array): SideModuleLinks | undefined {
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) return undefined
  const list = sections(bytes)
  const needed: string[] = []
  const weak = new Set<string>()
  const signatures: (string | undefined)[] = []
  const functions = new Map<string, string>()
  const functionAddresses: string[] = []
  const dataAddresses: string[] = []
  const exports = new Set<string>()
  for (const section of list) {
    const reader = new Reader(bytes, section.start)
    if (section.id === 0) {
      if (reader.name() !== 'dylink.0') continue
      while (reader.at < section.end) {
        const type = reader.u8()
        const end = reader.uleb() + reader.at
        if (type === DYLINK_NEEDED) {
          for (let n = reader.uleb(); n > 0; n--) needed.push(reader.name())
        } else if (type === DYLINK_IMPORT_INFO) {
          for (let n = reader.uleb(); n > 0; n--) {
            reader.name()
            const field = reader.name()
            if ((reader.uleb() & BINDING_MASK) === BINDING_WEAK) weak.add(field)
          }
        }
        reader.at = end
      }
    } else if (section.id === SECTION_TYPE) {
      for (let n = reader.uleb(); n > 0; n--) {
        // Anything but a plain function type (GC proposal types) is beyond this reader.
        if (reader.u8() !== FUNCTION_TYPE) return undefined
        const params = valueTypes(reader)
        const results = valueTypes(reader)
        signatures.push(params && results && results.length <= 1 ? `${results[0] ?? 'v'}${params.join('')}` : undefined)
      }
    } else if (section.id === SECTION_IMPORT) {
      for (let n = reader.uleb(); n > 0; n--) {
        const module = reader.name()
        const field = reader.name()
        const kind = reader.u8()
        if (kind === KIND_FUNCTION) {
          const signature = signatures[reader.uleb()]
          if ((module === 'env' || module === 'wasi_snapshot_preview1') && signature !== undefined) functions.set(field, signature)
        } else if (kind === KIND_TABLE || kind === KIND_MEMORY) {
          if (kind === KIND_TABLE) reader.u8()
          const flags = reader.uleb()
          reader.uleb()
          if (flags & 1) reader.uleb()
        } else if (kind === KIND_GLOBAL) {
          reader.u8()
          reader.u8()
          if (module === 'GOT.func') functionAddresses.push(field)
          else if (module === 'GOT.mem') dataAddresses.push(field)
        } else {
          // A tag (exception handling): its attribute and type.
          reader.u8()
          reader.uleb()
        }
      }
    } else if (section.id === SECTION_EXPORT) {
      for (let n = reader.uleb(); n > 0; n--) {
        exports.add(reader.name())
        reader.u8()
        reader.uleb()
      }
    }
  }
  return { functions, functionAddresses, dataAddresses, exports, needed, weak }
}

/** A vector of value types as signature letters; undefined where one has none (v128, references). */
function valueTypes(reader: Reader): string[] | undefined {
  const letters: string[] = []
  let known = true
  for (let n = reader.uleb(); n > 0; n--) {
    const type = reader.u8()
    // `(ref null? heaptype)` carries its heap type after it.
    if (type === REF || type === REF_NULL) reader.sleb32()
    const letter = SIGNATURE_LETTER[type]
    if (letter === undefined) known = false
    else letters.push(letter)
  }
  return known ? letters : undefined
}
