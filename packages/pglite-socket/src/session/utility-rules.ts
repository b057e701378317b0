import type { UtilityRefusal, UtilityStatement } from '@pgwasm/pglite'

/*
 * One client's rules on the statements that name the engine session's
 * prepared statements, cursors and LISTEN channels, which every client
 * shares. The engine asks them with the name as Postgres parsed it, in the
 * client's own statements and in any dynamic SQL they run (the core's
 * `LeaseClient.checkUtility`), so an escaped identifier or an `EXECUTE
 * format(...)` in a DO block meets the same rule as the plain statement.
 * The text checks before a batch (foreign-names.ts, own-scope.ts) stay as
 * the path for the plain forms, where they answer as Postgres would.
 */

/** A name the server gives a client's protocol-level statement or portal: the client's pid, then `_` or `.` (rename.ts). */
const SERVER_GIVEN = /^c(\d+)[_.]/

/** Whether `name` is one the server gave another client than `pid`. */
export function isOtherClientsName(name: string, pid: number): boolean {
  const owner = SERVER_GIVEN.exec(name)
  return owner !== null && Number(owner[1]) !== pid
}

function reachesEveryClient(what: string, instead: string): UtilityRefusal {
  return {
    code: '0A000',
    message: `${what} inside a function, a DO block or a combined statement is not supported by pgwasm-server`,
    hint: `Every client's ${instead} live in one engine session. Send ${what} as a statement of its own: the server then runs it for this client's only.`,
  }
}

/** What a client's session learns from the statements the engine runs for it. */
export interface UtilityEvents {
  /** A LISTEN or UNLISTEN (`null`: all) is about to run. */
  heard(kind: 'listen' | 'unlisten', channel: string | null): void
  /** A SET, RESET or set_config() is about to run (in a function's body too). */
  settingChanged(): void
  /**
   * A PREPARE (`prepared`: its name) or DECLARE CURSOR of a name of its own
   * is about to run: refused past the client's memory share.
   */
  objectMade(prepared?: string): UtilityRefusal | undefined
  /** A DEALLOCATE or CLOSE of one of its own is about to run. */
  objectDropped(): void
  /** Whether `name` is a `WITH HOLD` cursor another client (or an in-process caller) declared. */
  othersCursor(name: string): boolean
}

/** The check for the client whose pid is `pid`. */
export function clientUtilityRules(pid: number, events: UtilityEvents) {
  return (statement: UtilityStatement): UtilityRefusal | undefined => {
    const { tag, name } = statement
    switch (tag) {
      case 'EXECUTE':
      case 'DEALLOCATE':
        if (name !== null && isOtherClientsName(name, pid)) return { code: '26000', message: `prepared statement "${name}" does not exist` }
        if (tag === 'DEALLOCATE') events.objectDropped()
        return undefined
      case 'CLOSE CURSOR':
      case 'FETCH':
      case 'MOVE':
        if (name !== null && (isOtherClientsName(name, pid) || events.othersCursor(name))) return { code: '34000', message: `cursor "${name}" does not exist` }
        if (tag === 'CLOSE CURSOR') events.objectDropped()
        return undefined
      case 'PREPARE':
      case 'DECLARE CURSOR':
        return name !== null && isOtherClientsName(name, pid)
          ? {
              code: '42939',
              message: `the name "${name}" is reserved: pgwasm-server gives it to another client's ${tag === 'PREPARE' ? 'prepared statement' : 'portal'}`,
              hint: 'Choose a name that does not start with "c" and digits followed by "_" or ".".',
            }
          : events.objectMade(tag === 'PREPARE' && name !== null ? name : undefined)
      case 'DEALLOCATE ALL':
        return reachesEveryClient('DEALLOCATE ALL', 'prepared statements')
      case 'CLOSE CURSOR ALL':
        return reachesEveryClient('CLOSE ALL', 'cursors')
      case 'DISCARD TEMP':
        return reachesEveryClient('DISCARD TEMP', 'temporary tables')
      case 'LISTEN':
        events.heard('listen', name)
        return undefined
      case 'UNLISTEN':
        events.heard('unlisten', name)
        return undefined
      case 'SET':
      case 'RESET':
        events.settingChanged()
        return undefined
      default:
        return undefined
    }
  }
}
