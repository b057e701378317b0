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

export function quoteChannel(name: string): string {
  return `"${name.replace(/"/g, '""')}"`
}

/** Leading white space and comments, which psql sends along with the statement. */
const LEADING_NOISE = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/

/** `COPY ... FROM STDIN` as the statement: the client sends data after a CopyInResponse. */
export function isCopyFromStdin(sql: string): boolean {
  return /^copy\b[\s\S]*\bfrom\s+stdin\b/i.test(sql.replace(LEADING_NOISE, ''))
}

/** `DISCARD ALL` (or `DISCARD` of listens) ends every LISTEN of the backend session. */
export function discardsListens(sql: string): boolean {
  return /\bdiscard\s+all\b/i.test(sql)
}

/** `DROP DATABASE [IF EXISTS] name`, the name as stored. */
export function droppedDatabase(sql: string): string | undefined {
  const m = /^\s*drop\s+database\s+(?:if\s+exists\s+)?("(?:[^"]|"")+"|[\p{L}_][\p{L}\p{N}_$]*)/iu.exec(sql)
  return m ? channelName(m[1]!) : undefined
}
