import { quoteChannel } from '../sql/listen.js'
import { Msg, concat, cstrings, frame, queryMessage } from '../wire/wire.js'

const SYNC = frame(Msg.Sync, new Uint8Array(0))
const STATEMENT = new Uint8Array([0x53 /* S */])

export interface Leftovers {
  /** An extended-protocol sequence is open (no Sync after it yet). */
  readonly unsynced: boolean
  /** A transaction block is open. */
  readonly inTransaction: boolean
  /** The client's prepared statements, as renamed on the engine. */
  readonly statements: Iterable<string>
  /** Channels no other client listens to any more. */
  readonly unlisten: readonly string[]
}

/**
 * The frames that give the engine back as a departing client should leave
 * it: end its extended sequence, close its prepared statements, roll back
 * its transaction, UNLISTEN what nobody needs. Empty when there is nothing to do.
 */
export function cleanupMessage(left: Leftovers): Uint8Array {
  const frames: Uint8Array[] = []
  if (left.unsynced) frames.push(SYNC)
  let closed = 0
  for (const name of left.statements) {
    frames.push(frame(Msg.Close, concat([STATEMENT, cstrings(name)])))
    closed++
  }
  if (closed > 0) frames.push(SYNC)
  const sql = [...(left.inTransaction ? ['ROLLBACK'] : []), ...left.unlisten.map((c) => `UNLISTEN ${quoteChannel(c)}`)]
  if (sql.length > 0) frames.push(queryMessage(sql.join(';')))
  return concat(frames)
}
