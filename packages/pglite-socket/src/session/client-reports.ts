import { TxStatus } from '@pgwasm/pglite/protocol'
import type { EngineLease } from '@pgwasm/pglite'
import { readReported, reportChanges, type ReportedSettings } from '../pooler/reported-settings.js'
import type { OutputSplitter } from '../wire/output.js'
import { startupReply } from './startup.js'

/**
 * The reported settings (reported-settings.ts) as one client was last told
 * them, and the ParameterStatus messages that tell it of a change.
 */
export class ClientReports {
  #reported: ReportedSettings = new Map()
  /** What the cancel helper told this client at startup, until the server has read the real values. */
  #told: ReportedSettings | undefined
  /** A reported setting changed inside the open transaction block: its end (or a rollback to a savepoint) may change it back. */
  #inTransaction = false

  constructor(told: ReportedSettings | undefined) {
    this.#told = told
  }

  /** A change inside a transaction block is still to be looked at after it. */
  get pending(): boolean {
    return this.#inTransaction
  }

  /** The values at login: read from the engine, else what the cancel helper told, else `assumed()`. */
  loggedIn(read: ReportedSettings | undefined, assumed: () => ReportedSettings): void {
    this.#reported = read ?? this.#told ?? assumed()
  }

  /** What the client hears once it is in. */
  startupReply(processId: number, secret: number): Uint8Array {
    const told = this.#told
    this.#told = undefined
    // A client the cancel helper started has had its startup reply: it hears only what was told wrong.
    return told ? reportChanges(told, this.#reported) : startupReply(this.#reported, processId, secret)
  }

  /**
   * Tells the client of each reported setting whose value changed since it
   * was last told, in ParameterStatus messages before the batch's
   * ReadyForQuery, as Postgres reports them.
   * @returns whether the values were read (false in an aborted transaction block).
   */
  report(lease: EngineLease, splitter: OutputSplitter): boolean {
    const now = readReported(lease)
    // An aborted transaction block cannot read them: asked again after its end.
    if (!now) {
      this.#inTransaction = true
      return false
    }
    const frames = reportChanges(this.#reported, now)
    this.#reported = now
    const inTransaction = splitter.lastStatus === TxStatus.InBlock || splitter.lastStatus === TxStatus.Failed
    if (frames.length > 0) {
      splitter.beforeReady(frames)
      if (inTransaction) this.#inTransaction = true
    }
    if (!inTransaction) this.#inTransaction = false
    return true
  }
}
