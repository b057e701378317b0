import { isIP } from 'node:net'
import type { ActivityRow } from '@pgwasm/pglite'
import { decodeUtf8 } from '../wire/wire.js'

/** ReadyForQuery's status bytes. */
const IDLE = 0x49 /* I */
const IDLE_STATES = new Map<number, string>([
  [IDLE, 'idle'],
  [0x54 /* T */, 'idle in transaction'],
  [0x45 /* E */, 'idle in transaction (aborted)'],
])

/** What a client's row is made of besides the times {@link ClientActivity} keeps. */
export interface ActivityFacts {
  readonly pid: number
  readonly applicationName: string
  /** Its last SQL (BatchMarks.activitySql). */
  readonly sql: Uint8Array
  /** Its last ReadyForQuery status byte. */
  readonly status: number
  readonly inTransaction: boolean
  /** Its statement is the one the engine runs. */
  readonly running: boolean
  /** Its batch waits for the engine. */
  readonly waiting: boolean
  readonly address: string | undefined
  readonly port: number | undefined
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
    if (status !== IDLE && was === IDLE) this.#xactStart = this.#queryStart
    this.#stateChange = Date.now()
  }

  row(facts: ActivityFacts): ActivityRow {
    const { running, waiting, address } = facts
    const state = running || waiting ? 'active' : IDLE_STATES.get(facts.status) ?? 'idle'
    return {
      pid: facts.pid,
      applicationName: facts.applicationName,
      state,
      query: decodeUtf8(facts.sql),
      ...(waiting ? { waitEventType: 'IPC', waitEvent: 'EngineHeldByAnotherClient' } : {}),
      backendStart: this.#backendStart,
      ...(facts.inTransaction && this.#xactStart !== undefined ? { xactStart: this.#xactStart } : {}),
      ...(this.#queryStart !== undefined ? { queryStart: this.#queryStart } : {}),
      ...(this.#stateChange !== undefined ? { stateChange: running ? this.#queryStart ?? this.#stateChange : this.#stateChange } : {}),
      ...(address !== undefined && isIP(address) !== 0 ? { clientAddr: address, ...(facts.port !== undefined ? { clientPort: facts.port } : {}) } : {}),
    }
  }
}
