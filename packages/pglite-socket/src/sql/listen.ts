/** LISTEN / UNLISTEN statements in a client's SQL, for routing notifications to it. */
export interface ListenChanges {
  listen: string[]
  unlisten: string[]
  unlistenAll: boolean
}

const STATEMENT = /\b(un)?listen\s+("(?:[^"]|"")+"|[\p{L}_][\p{L}\p{N}_$]*|\*)/giu

/** Channel names as Postgres stores them: quoted kept, unquoted folded to lower case. */
export function findListenChanges(sql: string): ListenChanges | undefined {
  if (!/listen/i.test(sql)) return undefined
  const changes: ListenChanges = { listen: [], unlisten: [], unlistenAll: false }
  // Quoted strings and comments cannot hold a statement: blank them out first.
  const code = sql.replace(/'(?:[^']|'')*'|--[^\n]*|\/\*[\s\S]*?\*\//g, (m) => ' '.repeat(m.length))
  for (const m of code.matchAll(STATEMENT)) {
    const raw = m[2]!
    if (m[1]) {
      if (raw === '*') changes.unlistenAll = true
      else changes.unlisten.push(channelName(raw))
    } else if (raw !== '*') {
      changes.listen.push(channelName(raw))
    }
  }
  return changes.listen.length || changes.unlisten.length || changes.unlistenAll ? changes : undefined
}

function channelName(raw: string): string {
  return raw.startsWith('"') ? raw.slice(1, -1).replace(/""/g, '"') : raw.toLowerCase()
}

/** A channel name quoted as an identifier. */
export { quoteIdent as quoteChannel } from './quoting.js'

/** `DISCARD ALL` (or `DISCARD` of listens) ends every LISTEN of the backend session. */
export function discardsListens(sql: string): boolean {
  return /\bdiscard\s+all\b/i.test(sql)
}

/** `DROP DATABASE [IF EXISTS] name`, the name as stored. */
export function droppedDatabase(sql: string): string | undefined {
  const m = /^\s*drop\s+database\s+(?:if\s+exists\s+)?("(?:[^"]|"")+"|[\p{L}_][\p{L}\p{N}_$]*)/iu.exec(sql)
  return m ? channelName(m[1]!) : undefined
}

/** Lower-cased words (after their first letter) that may start a statement the server must see. */
const AFTER_L = 'isten' // LISTEN, UNLISTEN
const AFTER_D = ['iscard', 'rop'] // DISCARD, DROP DATABASE
const AFTER_C = 'opy' // COPY ... FROM STDIN

/**
 * Whether the UTF-8 SQL in `bytes[from, to)` may hold LISTEN, UNLISTEN,
 * DISCARD, DROP or COPY, in any case: a byte scan, so that the text of
 * every other query is never decoded. False positives only cost the decode.
 */
export function mayNeedInspection(bytes: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = bytes[i]! | 0x20
    if (c === 0x6c /* l */) {
      if (follows(bytes, i + 1, to, AFTER_L)) return true
    } else if (c === 0x64 /* d */) {
      if (follows(bytes, i + 1, to, AFTER_D[0]!) || follows(bytes, i + 1, to, AFTER_D[1]!)) return true
    } else if (c === 0x63 /* c */) {
      if (follows(bytes, i + 1, to, AFTER_C)) return true
    }
  }
  return false
}

function follows(bytes: Uint8Array, at: number, to: number, lower: string): boolean {
  if (at + lower.length > to) return false
  for (let k = 0; k < lower.length; k++) if ((bytes[at + k]! | 0x20) !== lower.charCodeAt(k)) return false
  return true
}
