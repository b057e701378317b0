import { TxStatus } from '@pgwasm/pglite/protocol'
import { isIP } from 'node:net'
import type { ActivityRow } from '@pgwasm/pglite'
import { decodeUtf8 } from '../wire/wire.js'
import type { BatchMarks } from './frame-loop.js'
import type { Transport } from './session-host.js'

/** ReadyForQuery's status bytes. */
const IDLE_STATES = new Map<number, string>([
  [TxStatus.Idle, 'idle'],
  [TxStatus.InBlock, 'idle in transaction'],
  [TxStatus.Failed, 'idle in transaction (aborted)'],
])

/** What a client's row is made of besides the times {@link ClientActivity} keeps. */
export interface ActivitySource {
  readonly processId: number
  readonly applicationName: string
  /** Its last SQL is `marks.activitySql`. */
  readonly marks: Pick<BatchMarks, 'activitySql'>
  /** Its last ReadyForQuery status byte. */
  readonly status: number
  readonly inTransaction: boolean
  readonly transport: Pick<Transport, 'remoteAddress' | 'remotePort'>
}

/** What `pg_stat_activity` shows of one client: when it connected, and when its last query, state and transaction began. */
export class ClientActivity {
  readonly #backendStart = Date.now()
  #queryStart: number | undefined
  #stateChange: number | undefined
  #xactStart: number | undefined

  /** Its request begins on the engine now. */
  queryStarted(): void {
    this.#queryStart = Date.now()
  }

  /** Its ReadyForQuery status goes from `was` to `status` now. */
  statusChanged(was: number, status: number): void {
    if (status !== TxStatus.Idle && was === TxStatus.Idle) this.#xactStart = this.#queryStart
    this.#stateChange = Date.now()
  }

  /** Its row; `running`: its statement is the one the engine runs; `waiting`: its batch waits for the engine. */
  row(source: ActivitySource, running: boolean, waiting: boolean): ActivityRow {
    const address = source.transport.remoteAddress
    const port = source.transport.remotePort
    const state = running || waiting ? 'active' : IDLE_STATES.get(source.status) ?? 'idle'
    return {
      pid: source.processId,
      applicationName: source.applicationName,
      state,
      query: decodeUtf8(source.marks.activitySql),
      ...(waiting ? { waitEventType: 'IPC', waitEvent: 'EngineHeldByAnotherClient' } : {}),
      backendStart: this.#backendStart,
      ...(source.inTransaction && this.#xactStart !== undefined ? { xactStart: this.#xactStart } : {}),
      ...(this.#queryStart !== undefined ? { queryStart: this.#queryStart } : {}),
      ...(this.#stateChange !== undefined ? { stateChange: running ? this.#queryStart ?? this.#stateChange : this.#stateChange } : {}),
      ...(address !== undefined && isIP(address) !== 0 ? { clientAddr: address, ...(port !== undefined ? { clientPort: port } : {}) } : {}),
    }
  }
}
