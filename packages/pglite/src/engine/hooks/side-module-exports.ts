import { readSideModuleLinks } from './side-module-links.js'
import { Reader, SECTION_EXPORT, rebuild, sectionOf, sections, uleb } from '../loading/wasm-binary.js'

/**
 * Side modules of extension bundles, with only the exports anything can
 * look up.
 *
 * A side module built by Emscripten exports every function with default
 * visibility: pgcrypto, which links OpenSSL in, exports 8,842 symbols. The
 * glue's loader gives each exported function a slot in the function table
 * and a `GOT` entry, one JavaScript call at a time, whenever it
 * instantiates the module: preloading pgcrypto grew the table by 10,430
 * entries and took ~100 ms of a module's creation, paid by every restore
 * of a database with extensions that needs a new module (the first in a
 * process, a clone while the source stays open, a test file's first
 * database). Nothing but these can look a symbol up:
 *
 * - Postgres, through `dlsym`: `Pg_magic_func`, `_PG_init` and the other
 *   `_PG_*` entry points, and the C functions of the extension's SQL
 *   objects, which `PG_FUNCTION_INFO_V1(f)` exports as `f` beside
 *   `pg_finfo_f` (a C function without its info record does not load
 *   since PostgreSQL 10).
 * - The loader, for its own symbols (`__wasm_call_ctors`,
 *   `__wasm_apply_data_relocs`, `__start_em_asm`, `__em_js__*`, ...).
 * - Modules linking against this one: the module's own `GOT.func` and
 *   `GOT.mem` imports (the addresses it takes of its own symbols go
 *   through its GOT), and every import of the other modules installed
 *   with it (`alsoKeep`).
 *
 * The other exports are dropped from the export section; the code is
 * unchanged. pgcrypto keeps 1,456 exports and its preload costs about a
 * third. Every module of a process is made from the same trimmed bytes,
 * so the table layout a snapshot records is the same in all of them.
 */
export function withNeededExports(bytes: Uint8Array, alsoKeep: ReadonlySet<string>): Uint8Array {
  const links = readSideModuleLinks(bytes)
  if (!links) return bytes
  const list = sections(bytes)
  const section = list.find((s) => s.id === SECTION_EXPORT)
  if (!section) return bytes
  const reader = new Reader(bytes, section.start)
  const entries: { name: string; bytes: Uint8Array }[] = []
  for (let n = reader.uleb(); n > 0; n--) {
    const from = reader.at
    const name = reader.name()
    reader.u8()
    reader.uleb()
    entries.push({ name, bytes: bytes.subarray(from, reader.at) })
  }
  const own = new Set([...links.functionAddresses, ...links.dataAddresses])
  const kept = entries.filter(({ name }) => own.has(name) || alsoKeep.has(name) || lookedUp(name, links.exports))
  if (kept.length === entries.length) return bytes
  const payload = [Uint8Array.from(uleb(kept.length)), ...kept.map((e) => e.bytes)]
  return rebuild(bytes, list, new Map([[SECTION_EXPORT, sectionOf(SECTION_EXPORT, payload)]])).bytes
}

/** Whether Postgres or the loader may look `name` up by name (see the file comment). */
function lookedUp(name: string, exports: ReadonlySet<string>): boolean {
  return (
    name.startsWith('__') ||
    name.startsWith('_emscripten') ||
    name.startsWith('_PG_') ||
    name === 'Pg_magic_func' ||
    name.startsWith('pg_finfo_') ||
    exports.has(`pg_finfo_${name}`)
  )
}

/**
 * Every symbol `bytes` imports (functions, and addresses through its GOT),
 * which the modules installed with it must keep exporting; undefined where
 * the module is beyond the reader (then nothing may be trimmed).
 */
export function importedSymbols(bytes: Uint8Array): string[] | undefined {
  const links = readSideModuleLinks(bytes)
  return links && [...links.functions.keys(), ...links.functionAddresses, ...links.dataAddresses]
}
