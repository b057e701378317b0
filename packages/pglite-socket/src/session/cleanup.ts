import { Frontend } from '@pgwasm/pglite/protocol'
import type { ListenRouting } from '../pooler/listen-routing.js'
import type { Multiplexer, MuxClient } from '../pooler/multiplexer.js'
import { quoteChannel } from '../sql/listen.js'
import type { StatementRenamer } from '../wire/rename.js'
import { SYNC, concat, cstrings, frame, queryMessage } from '../wire/wire.js'
import type { SessionHost } from './session-host.js'

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
    frames.push(frame(Frontend.Close, concat([STATEMENT, cstrings(name)])))
    closed++
  }
  if (closed > 0) frames.push(SYNC)
  const sql = [...(left.inTransaction ? ['ROLLBACK'] : []), ...left.unlisten.map((c) => `UNLISTEN ${quoteChannel(c)}`)]
  if (sql.length > 0) frames.push(queryMessage(sql.join(';')))
  return concat(frames)
}

/** What the cleanup needs of a client that left. */
export interface LeavingClient {
  /** The client as its multiplexer knows it. */
  readonly client: MuxClient
  readonly processId: number
  readonly server: Pick<SessionHost, 'log' | 'left'>
  readonly renamer: Pick<StatementRenamer, 'statements'>
  readonly listens: ListenRouting | undefined
  readonly unsynced: boolean
  readonly inTransaction: boolean
  /** The engine is given back clean: the client is idle, with no sequence open. */
  settled(): void
}

/**
 * Rolls back an open transaction, closes the client's prepared statements
 * and LISTENs no one else needs, then releases the engine (and tells the
 * server the client of `database` is gone).
 */
export async function cleanUp(mux: Multiplexer, leaving: LeavingClient, database: string): Promise<void> {
  const client = leaving.client
  const unlisten = leaving.listens?.drop() ?? []
  mux.forget(client)
  try {
    await mux.run(client, (lease) => {
      // Decided with the engine in hand: a batch that finished just before
      // may have opened a transaction.
      const message = cleanupMessage({
        unsynced: leaving.unsynced,
        inTransaction: leaving.inTransaction || leaving.unsynced || lease.inTransaction,
        statements: leaving.renamer.statements,
        unlisten,
      })
      leaving.settled()
      if (message.length > 0) lease.execProtocolRawStream(message, () => {})
      // Its temporary relations, holdable cursors and SQL-prepared statements go with it.
      const objects = mux.objects.takeCleanup(client)
      if (objects.length > 0) lease.execProtocolRawStream(objects, () => {})
      // As a disconnecting backend does: its session advisory locks go.
      lease.forgetClient(leaving.processId)
    })
  } catch (err) {
    leaving.server.log(`session ${leaving.processId}: cleanup failed: ${String(err)}`)
  } finally {
    leaving.server.left(database)
    mux.release(client)
  }
}
