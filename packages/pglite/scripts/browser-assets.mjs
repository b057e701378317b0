// The browser build's engine assets as a first visit fetches them
// (docs/engine.md, "Loading it"): the engine binary without its data
// segments, its memory image and the files Postgres reads at start in one
// .lzma file, the template as .lzma, and the rest of pglite.data in packs
// fetched when Postgres first opens one of their files.
import { execFileSync } from 'node:child_process'

/** Reads a LEB128 unsigned integer at `at`; returns [value, next offset]. */
function leb(bytes, at) {
  let value = 0
  let shift = 0
  let byte
  do {
    byte = bytes[at++]
    value += (byte & 0x7f) * 2 ** shift
    shift += 7
  } while (byte & 0x80)
  return [value, at]
}

function encodeLeb(value) {
  const out = []
  do {
    let byte = value % 128
    value = Math.floor(value / 128)
    if (value > 0) byte |= 0x80
    out.push(byte)
  } while (value > 0)
  return Uint8Array.from(out)
}

/**
 * Splits the engine binary into the binary without data segments (the
 * code, 2.4 MB gzipped) and the memory those segments fill (2.6 MB, 0.86 MB
 * gzipped, 0.62 MB as .lzma). Every segment must be active at a constant
 * address (the build's are): the loader then writes the image at
 * `base` before the runtime starts (memory-image.ts). The start function
 * only zeroes the BSS, which lies past the segments.
 * @returns {{ code: Uint8Array, image: Uint8Array, base: number }}
 */
export function splitDataSegments(wasm) {
  const sections = []
  let at = 8
  while (at < wasm.length) {
    const id = wasm[at]
    const [size, body] = leb(wasm, at + 1)
    sections.push({ id, start: at, body, end: body + size })
    at = body + size
  }
  const data = sections.find((s) => s.id === 11)
  if (!data) throw new Error('pglite.wasm has no data section')
  let [count, p] = leb(wasm, data.body)
  const segments = []
  for (let i = 0; i < count; i++) {
    const [flags, q] = leb(wasm, p)
    if (flags !== 0 || wasm[q] !== 0x41) throw new Error(`pglite.wasm data segment ${i} is not active at a constant address; check the engine version`)
    // i32.const takes a signed LEB; the build's addresses are below 2^31.
    const [offset, r] = leb(wasm, q + 1)
    if (wasm[r] !== 0x0b) throw new Error(`pglite.wasm data segment ${i} has an offset expression other than one i32.const`)
    const [length, s] = leb(wasm, r + 1)
    segments.push({ offset, bytes: wasm.subarray(s, s + length) })
    p = s + length
  }
  const base = Math.min(...segments.map((s) => s.offset))
  const end = Math.max(...segments.map((s) => s.offset + s.bytes.length))
  checkStartFunction(wasm, sections, end)
  const image = new Uint8Array(end - base)
  for (const s of segments) image.set(s.bytes, s.offset - base)
  // The data count section (12) must agree with the data section: both say none.
  const parts = [wasm.subarray(0, 8)]
  for (const s of sections) {
    if (s.id === 11 || s.id === 12) parts.push(Uint8Array.of(s.id), encodeLeb(1), Uint8Array.of(0))
    else parts.push(wasm.subarray(s.start, s.end))
  }
  const code = Buffer.concat(parts)
  if (!WebAssembly.validate(code)) throw new Error('pglite.wasm without its data segments does not validate')
  return { code, image, base }
}

/**
 * The image is written after instantiation, so after the start function:
 * it must not write where the image goes. This build's only zeroes the BSS
 * (`memory.fill` of constants); anything else stops the build.
 */
function checkStartFunction(wasm, sections, imageEnd) {
  const start = sections.find((s) => s.id === 8)
  if (!start) return
  const [fn] = leb(wasm, start.body)
  let imported = 0
  const imports = sections.find((s) => s.id === 2)
  if (imports) {
    let [count, p] = leb(wasm, imports.body)
    for (let i = 0; i < count; i++) {
      for (let name = 0; name < 2; name++) {
        const [length, q] = leb(wasm, p)
        p = q + length
      }
      const kind = wasm[p++]
      if (kind === 0) [, p] = leb(wasm, p)
      else if (kind === 1) [, p] = limits(wasm, p + 1)
      else if (kind === 2) [, p] = limits(wasm, p)
      else if (kind === 3) p += 2
      else if (kind === 4) [, p] = leb(wasm, p + 1)
      if (kind === 0) imported++
    }
  }
  const codeSection = sections.find((s) => s.id === 10)
  let [count, p] = leb(wasm, codeSection.body)
  for (let i = 0; i < count; i++) {
    const [size, body] = leb(wasm, p)
    if (i + imported === fn) {
      // No locals; i32.const dest, i32.const 0, i32.const length, memory.fill 0, end.
      const bytes = wasm.subarray(body, body + size)
      let q = 1
      const consts = []
      for (let k = 0; k < 3; k++) {
        if (bytes[0] !== 0 || bytes[q] !== 0x41) break
        const [value, next] = leb(bytes, q + 1)
        consts.push(value)
        q = next
      }
      const fill = consts.length === 3 && consts[1] === 0 && bytes[q] === 0xfc && bytes[q + 1] === 0x0b && bytes[q + 3] === 0x0b && q + 4 === bytes.length
      if (!fill || consts[0] < imageEnd) throw new Error('pglite.wasm: its start function does more than zero the memory past the data segments; check the engine version')
      return
    }
    p = body + size
  }
  throw new Error('pglite.wasm: its start function was not found')
}

function limits(bytes, at) {
  const flags = bytes[at]
  let [, p] = leb(bytes, at + 1)
  if (flags & 1) [, p] = leb(bytes, p)
  return [flags, p]
}

/** `xz --format=lzma -9e`: what lzma.ts decodes. @throws when xz is missing (apt-get install xz-utils). */
export function lzma(bytes) {
  try {
    return execFileSync('xz', ['--format=lzma', '-9e', '--stdout'], { input: bytes, maxBuffer: 1 << 30 })
  } catch (cause) {
    throw new Error(`xz --format=lzma failed (the browser build needs xz: apt-get install xz-utils): ${cause.message}`, { cause })
  }
}

/** The files of pglite.data, in order, from the glue's file-packager metadata. */
export function dataFiles(glue, dataSize) {
  const match = /\{files:(\[.*?\]),remote_package_size:(\d+)\}/.exec(glue)
  if (!match) throw new Error("pglite.js: the file-packager metadata is not where it was; check the engine version")
  const files = JSON.parse(match[1].replace(/(filename|start|end):/g, '"$1":'))
  if (Number(match[2]) !== dataSize) throw new Error(`pglite.js expects a pglite.data of ${match[2]} bytes, the package's is ${dataSize}`)
  let at = 0
  for (const f of files) {
    // The loader rebuilds pglite.data from the packs in this order (lazy-files.ts).
    if (f.start !== at) throw new Error(`pglite.data: ${f.filename} starts at ${f.start}, not where the file before it ended (${at})`)
    at = f.end
  }
  if (at !== dataSize) throw new Error(`pglite.data's files end at ${at}, the file is ${dataSize} bytes`)
  return files.map((f) => ({ path: f.filename, size: f.end - f.start, start: f.start }))
}

/**
 * Which download a file of pglite.data travels in. `boot`: in pglite.data
 * itself (what every start reads: measured by instrumenting the file system
 * at boot, `select now()`, DDL and DML; plus placeholders and the
 * plpgsql extension's control files). Each side module is a pack of its
 * own (a client encoding loads one conversion of 24), and the rest goes by
 * what uses it: time zones (`SET TIME ZONE`), text search, ICU collations,
 * and what only initdb reads.
 */
export function packOf(path) {
  const share = '/pglite/share/postgresql/'
  if (/^\/(home\/|pglite\/(bin\/|locale-a$|password$|pgstdin$|pgstdout$))/.test(path)) return 'boot'
  if (path === `${share}timezone/UTC` || path === `${share}timezone/GMT` || path === `${share}timezonesets/Default`) return 'boot'
  if (path.startsWith(`${share}extension/plpgsql`)) return 'boot'
  const lib = /^\/pglite\/lib\/postgresql\/([\w-]+)\.so$/.exec(path)
  if (lib) return lib[1]
  if (path.startsWith('/pglite/lib/postgresql/pgxs/')) return 'pgxs'
  if (path.startsWith('/pglite/icu/')) return 'icu'
  if (path.startsWith(`${share}timezone/`)) return 'timezone'
  if (path.startsWith(`${share}timezonesets/`)) return 'timezonesets'
  if (path.startsWith(`${share}tsearch_data/`)) return 'tsearch_data'
  if (path.startsWith(share) && !path.slice(share.length).includes('/')) return 'initdb'
  throw new Error(`pglite.data: no download for ${path}; add it to packOf (scripts/browser-assets.mjs)`)
}
