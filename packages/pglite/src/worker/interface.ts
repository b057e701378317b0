// Types only: the worker's option types name the page's instance through
// this, not through the PGliteWorker class, which imports them (a page
// add-on's `setup` gets the instance).
import type { PGliteInterface } from '../interface.js'
import type { Transaction } from '../transaction-types.js'

/**
 * A `PGliteWorker` instance on the page: the public members of the
 * PGliteWorker class, which implements this (each is documented there).
 * Those it shares with `PGlite` have `PGlite`'s signatures.
 */
export interface PGliteWorkerInterface
  extends Pick<
    PGliteInterface,
    | 'waitReady'
    | 'debug'
    | 'ready'
    | 'closed'
    | 'query'
    | 'sql'
    | 'exec'
    | 'describeQuery'
    | 'listen'
    | 'unlisten'
    | 'onNotification'
    | 'offNotification'
    | 'execProtocolRaw'
    | 'execProtocolRawStream'
    | 'dumpDataDir'
    | 'close'
    | typeof Symbol.asyncDispose
  > {
  readonly usesSharedMemory: boolean
  readonly isLeader: boolean
  onLeaderChange(callback: () => void): () => void
  offLeaderChange(callback: () => void): void
  transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T>
}
