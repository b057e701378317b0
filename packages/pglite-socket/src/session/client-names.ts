import type { StatementRenamer } from '../wire/rename.js'
import { concat, decodeUtf8 } from '../wire/wire.js'

const utf8 = new TextEncoder()
/** ErrorResponse fields that may quote a statement or portal name: message, detail, hint. */
const NAMING_FIELDS = new Set([0x4d /* M */, 0x44 /* D */, 0x48 /* H */])

/**
 * Turns the names the server gives a client's statements and portals on the
 * shared engine (`c1001_s1`, and `c1001.u3` for a cached unnamed statement)
 * back into the client's own in error messages: the client must read
 * `prepared statement "s1" requires 2`, and `""` for its unnamed statement.
 * Runs on error frames only.
 */
export class ClientNames {
  readonly #pattern: RegExp
  readonly #prefixBytes: Uint8Array
  readonly #renamer: StatementRenamer

  /** `prefix` is the session's (`c1001`): renamed names start `<prefix>_`, cached ones `<prefix>.u`. */
  constructor(prefix: string, renamer: StatementRenamer) {
    this.#pattern = new RegExp(`"${prefix}(?:_([^"]*)|\\.u\\d+)"`, 'g')
    this.#prefixBytes = utf8.encode(`"${prefix}`)
    this.#renamer = renamer
  }

  /** The ErrorResponse frame `frame` with the client's names in it (the same frame when none needs changing). */
  readonly rewriteError = (frame: Uint8Array): Uint8Array => {
    if (indexOf(frame, this.#prefixBytes) < 0) return frame
    const parts: Uint8Array[] = [frame.subarray(0, 5)]
    let at = 5
    while (at < frame.length && frame[at] !== 0) {
      const code = frame[at]!
      const end = frame.indexOf(0, at + 1)
      if (end < 0) return frame
      const value = frame.subarray(at + 1, end)
      if (NAMING_FIELDS.has(code) && indexOf(value, this.#prefixBytes) >= 0) {
        const text = decodeUtf8(value).replace(this.#pattern, (_, name: string | undefined) => `"${this.#clientName(name)}"`)
        parts.push(new Uint8Array([code]), utf8.encode(text), new Uint8Array([0]))
      } else {
        parts.push(frame.subarray(at, end + 1))
      }
      at = end + 1
    }
    parts.push(new Uint8Array([0]))
    const out = concat(parts)
    new DataView(out.buffer, out.byteOffset, out.byteLength).setInt32(1, out.length - 1)
    return out
  }

  #clientName(renamed: string | undefined): string {
    if (renamed === undefined) return ''
    return this.#renamer.longNames.get(renamed) ?? renamed
  }
}

function indexOf(haystack: Uint8Array, needle: Uint8Array): number {
  return Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).indexOf(needle)
}
