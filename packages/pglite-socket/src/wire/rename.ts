import { Frontend } from '@pgwasm/pglite/protocol'
import { createHash } from 'node:crypto'
import { concat, readCString } from './wire.js'

const utf8 = new TextEncoder()
/** Longer names are replaced by a digest, so that renaming never pushes a small message over its size limit. */
const MAX_KEPT_NAME = 128
/** Long names remembered for error messages, at most (a client could make any number). */
const MAX_LONG_NAMES = 1024

/**
 * Gives each client its own namespace of prepared statements on the one
 * shared backend session: a non-empty name `s1` becomes `<prefix>s1` in
 * Parse, Bind, Describe and Close. A name longer than 128 characters becomes
 * `<prefix>h<digest>`: the prefix must not make a Describe or Close longer
 * than Postgres's 10000-byte limit for them. The unnamed ones stay unnamed:
 * a client owns the engine from its first extended message to Sync.
 *
 * Portals keep the client's names, so that a cursor it declared in SQL is
 * its portal too (psycopg's server-side cursors Describe and Execute them),
 * and a portal it bound is a cursor its SQL can FETCH. Two clients' portals
 * never live at once (a portal ends with its transaction, and a client in a
 * transaction owns the engine), except cursors declared WITH HOLD: a name
 * that is another client's such cursor is renamed, so it names none.
 */
export class StatementRenamer {
  readonly #prefix: string
  /** Whether a portal name is another client's (or an in-process caller's) held cursor. */
  readonly #othersCursor: (name: string) => boolean
  /** Statement names this client created (renamed), to close on disconnect. */
  readonly statements = new Set<string>()
  /** Digest name (after the prefix) -> the client's name, for names too long to keep (error messages show the client's). */
  readonly longNames = new Map<string, string>()

  constructor(prefix: string, othersCursor: (name: string) => boolean = () => false) {
    this.#prefix = prefix
    this.#othersCursor = othersCursor
  }

  /**
   * Whether the frame at `at` of `buffer` names no statement or portal, so
   * that {@link rewrite} would return it unchanged; read in place, nothing
   * decoded. (A frame too short to say is left to `rewrite`.)
   */
  static namesNothing(type: number, buffer: Uint8Array, at: number): boolean {
    switch (type) {
      case Frontend.Parse:
      case Frontend.Execute:
        return buffer[at + 5] === 0
      case Frontend.Bind:
        return buffer[at + 5] === 0 && buffer[at + 6] === 0
      case Frontend.Describe:
      case Frontend.Close:
        return buffer[at + 6] === 0
      default:
        return true
    }
  }

  /** Returns the frame with names rewritten (the same frame when nothing changes). */
  rewrite(type: number, frame: Uint8Array): Uint8Array {
    const end = frame.length
    switch (type) {
      case Frontend.Parse: {
        const [name, next] = readCString(frame, 5, end)
        if (!name) return frame
        const renamed = this.#name(name)
        this.statements.add(renamed)
        return this.#rebuild(type, [renamed], frame.subarray(next))
      }
      case Frontend.Bind: {
        const [portal, afterPortal] = readCString(frame, 5, end)
        const [statement, rest] = readCString(frame, afterPortal, end)
        if (!statement && !this.#renamesPortal(portal)) return frame
        return this.#rebuild(type, [this.#portal(portal), this.#name(statement)], frame.subarray(rest))
      }
      case Frontend.Describe:
      case Frontend.Close: {
        const kind = frame[5]!
        const [name, rest] = readCString(frame, 6, end)
        if (!name) return frame
        if (kind === 0x50 /* P */ && !this.#renamesPortal(name)) return frame
        const renamed = kind === 0x50 ? this.#portal(name) : this.#name(name)
        if (type === Frontend.Close && kind === 0x53 /* S */) this.statements.delete(renamed)
        return this.#rebuild(type, [String.fromCharCode(kind) + renamed], frame.subarray(rest))
      }
      case Frontend.Execute: {
        const [portal, rest] = readCString(frame, 5, end)
        if (!this.#renamesPortal(portal)) return frame
        return this.#rebuild(type, [this.#portal(portal)], frame.subarray(rest))
      }
      default:
        return frame
    }
  }

  /**
   * The engine's name for a prepared statement this client's SQL names
   * (`PREPARE s1`, `EXECUTE s1`): the one its Parse of `s1` gets, so that
   * SQL reaches the client's protocol-level statements and no other
   * client's, as on PostgreSQL. A name that already is one of this
   * client's (its own cleanup's SQL) stays.
   */
  sqlName(name: string): string {
    return name.startsWith(this.#prefix) ? name : this.#name(name)
  }

  #renamesPortal(name: string): boolean {
    return name !== '' && this.#othersCursor(name)
  }

  #portal(name: string): string {
    return this.#renamesPortal(name) ? this.#name(name) : name
  }

  #name(name: string): string {
    if (!name) return ''
    if (name.length <= MAX_KEPT_NAME) return this.#prefix + name
    const digest = `h${createHash('sha256').update(name).digest('hex').slice(0, 40)}`
    if (this.longNames.size < MAX_LONG_NAMES) this.longNames.set(digest, name)
    return this.#prefix + digest
  }

  #rebuild(type: number, names: string[], rest: Uint8Array): Uint8Array {
    const head = utf8.encode(names.map((n) => `${n}\u0000`).join(''))
    const out = concat([new Uint8Array(5), head, rest])
    out[0] = type
    new DataView(out.buffer, out.byteOffset, out.byteLength).setInt32(1, out.length - 1)
    return out
  }
}
