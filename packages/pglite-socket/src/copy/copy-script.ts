import { Backend, Frontend, TxStatus } from '@pgwasm/pglite/protocol'
import { transactionControl, type SqlStatement, type TransactionControl } from '@pgwasm/pglite/sql'
import { SYNC, concat, copyFail, forEachFrame, parseUnnamed, queryMessage, readyForQuery, responseField, statusLetter } from '../wire/wire.js'

/** The engine as one step of a script sees it, with the lease held. */
export interface ScriptEngine {
  /**
   * Runs `message`, writing the client's share of the output as it comes:
   * everything but ReadyForQuery and NotificationResponse. With `dropCopyIn`
   * the CopyInResponse the client was sent already goes too; with
   * `holdLastComplete` the last CommandComplete waits for {@link settleHeld}.
   * `copyIn` gives a COPY the rest of its data once `message` runs out
   * (EngineLease.copyInFrom).
   */
  forward(message: Uint8Array, dropCopyIn: boolean, holdLastComplete: boolean, copyIn?: () => Uint8Array | undefined): StepResult
  /** Sends or drops the CommandComplete `forward` held back. */
  settleHeld(send: boolean): void
  /** Runs `message` and returns its whole output, none of it sent. */
  collect(message: Uint8Array): Uint8Array
  /** Sends bytes to the client after what was forwarded so far. */
  write(bytes: Uint8Array): void
}

export interface StepResult {
  /** An ErrorResponse was sent. */
  readonly failed: boolean
  /** Status byte of the last ReadyForQuery (I, T or E). */
  readonly status: number
}

/**
 * Where the session stands between two statements of the query string, as
 * Postgres's `exec_simple_query` would: in no block, in the implicit block
 * a multi-statement query runs in, or in a block the client opened.
 */
type Block = 'none' | 'implicit' | 'explicit'

const PROBE_SAVEPOINT = 'pgwasm_copy_probe'
const SAVE = queryMessage(`SAVEPOINT ${PROBE_SAVEPOINT}`)
const RESTORE = queryMessage(`ROLLBACK TO SAVEPOINT ${PROBE_SAVEPOINT}; RELEASE SAVEPOINT ${PROBE_SAVEPOINT}`)
const BEGIN = queryMessage('BEGIN')
const COMMIT = queryMessage('COMMIT')
const ROLLBACK = queryMessage('ROLLBACK')
/** Ends a probing COPY once it has asked for data. Nobody sees the error. */
const PROBE_FAIL = copyFail('pgwasm probe')
/** SQLSTATE and routine of Parse's refusal of a string that raw-parsed into several statements. */
const MULTIPLE_COMMANDS = { code: '42601', routine: 'exec_parse_message' }
/** SQLSTATE of "there is already a transaction in progress". */
const ACTIVE_TRANSACTION = '25001'

/**
 * Runs a simple Query that holds `COPY ... FROM STDIN` a statement at a
 * time, because the engine cannot stop in the middle of a request to wait
 * for the client's data. The client sees what Postgres would send: the
 * results of the statements before the COPY, CopyInResponse, then (after its
 * CopyData and CopyDone or CopyFail) the rest, and one ReadyForQuery.
 *
 * A multi-statement query runs in one implicit transaction. An implicit
 * block cannot outlive one engine request, so an explicit `BEGIN` of ours
 * stands in for it; statements that behave differently in the two
 * (BEGIN, COMMIT, ROLLBACK, SAVEPOINT...) are run so that they send and do
 * what they would in the implicit block. Each piece is sent with the text
 * before it blanked out, so error positions count from the start of the
 * client's string.
 */
export class CopyInScript {
  readonly #sql: string
  readonly #statements: readonly SqlStatement[]
  readonly #multi: boolean
  #next = 0
  #block: Block
  #status: number
  #waiting: SqlStatement | undefined

  /** Whether its end sends ReadyForQuery: not for an extended-protocol COPY, whose ReadyForQuery answers the client's Sync. */
  readonly #ready: boolean

  /** `status` is the session's last ReadyForQuery status byte. */
  constructor(sql: string, statements: readonly SqlStatement[], status: number, ready = true) {
    this.#ready = ready
    this.#sql = sql
    this.#statements = statements
    this.#multi = statements.length > 1
    this.#status = status
    this.#block = status === TxStatus.Idle ? 'none' : 'explicit'
  }

  /** Whether a CopyInResponse was sent and the client's data is awaited. */
  get awaitingData(): boolean {
    return this.#waiting !== undefined
  }

  /** Status byte of the engine's last ReadyForQuery. */
  get status(): number {
    return this.#status
  }

  /**
   * Runs up to the first COPY that asks for data.
   * @returns whether it waits for data; otherwise ReadyForQuery was sent.
   */
  start(engine: ScriptEngine): boolean {
    if (this.#multi && !this.#parses(engine)) {
      // Postgres parses the whole string before it runs any of it: the same
      // string fails the same way, and nothing runs.
      this.#status = engine.forward(queryMessage(this.#sql), false, false).status
      return this.#end(engine)
    }
    return this.#advance(engine)
  }

  /** The Query frame of the COPY that waits for data: its request starts with it. */
  get waitingPiece(): Uint8Array {
    const copy = this.#waiting
    if (!copy) throw new Error('no COPY is waiting for data')
    return this.#piece(copy, copy)
  }

  /**
   * Runs the waiting COPY: `request` is {@link waitingPiece} followed by the
   * client's CopyData frames and its CopyDone or CopyFail, or by the first
   * of them, with `more` giving the rest as the engine asks (copy-stream.ts).
   * Then on to the next COPY or the end.
   * @returns whether it waits for data again; otherwise ReadyForQuery was sent.
   */
  supply(engine: ScriptEngine, request: Uint8Array, more?: () => Uint8Array | undefined): boolean {
    const copy = this.#waiting
    if (!copy) throw new Error('no COPY is waiting for data')
    this.#waiting = undefined
    this.#next++
    const result = engine.forward(request, true, this.#commitsLast(copy), more)
    this.#status = result.status
    return result.failed ? this.#fail(engine) : this.#advance(engine)
  }

  #advance(engine: ScriptEngine): boolean {
    const statements = this.#statements
    while (this.#next < statements.length) {
      const statement = statements[this.#next]!
      if (statement.copiesFromClient) {
        if (this.#askForData(engine, statement)) return true
        return this.#fail(engine)
      }
      const control = transactionControl(statement.words)
      if (control) {
        this.#next++
        if (!this.#runControl(engine, statement, control)) return this.#fail(engine)
        continue
      }
      let last = this.#next
      while (last + 1 < statements.length && isOrdinary(statements[last + 1]!)) last++
      this.#openImplicitBlock(engine)
      const result = engine.forward(this.#piece(statement, statements[last]!), false, this.#commitsLast(statements[last]!))
      this.#next = last + 1
      this.#status = result.status
      if (result.failed) return this.#fail(engine)
      // PREPARE TRANSACTION ends a block without being transaction control here.
      if (result.status === TxStatus.Idle) this.#block = 'none'
    }
    if (this.#block === 'implicit') {
      const result = this.#ours(engine, COMMIT, true)
      this.#block = 'none'
      engine.settleHeld(!result.failed)
      if (result.failed) return this.#fail(engine)
    }
    return this.#end(engine)
  }

  /**
   * Whether `statement` is the last one and ends the implicit block: Postgres
   * commits that before the statement's CommandComplete, so that a client
   * sees the error of a failed commit instead of it.
   */
  #commitsLast(statement: SqlStatement): boolean {
    return this.#block === 'implicit' && statement === this.#statements[this.#statements.length - 1]
  }

  /** Postgres starts the implicit block of a multi-statement query at its first statement, and again after a COMMIT. */
  #openImplicitBlock(engine: ScriptEngine): void {
    if (this.#block !== 'none' || !this.#multi) return
    this.#ours(engine, BEGIN, false)
    this.#block = 'implicit'
  }

  /**
   * Probes the COPY (in a savepoint, or in a transaction of its own) for
   * whether it gets as far as asking for data, and for the CopyInResponse
   * it sends then; that goes to the client. A COPY that fails before
   * asking is run for real, so that it fails where Postgres would.
   * @returns whether it waits for data.
   */
  #askForData(engine: ScriptEngine, copy: SqlStatement): boolean {
    this.#openImplicitBlock(engine)
    const message = this.#piece(copy, copy)
    if (this.#status !== TxStatus.Failed) {
      const inBlock = this.#status === TxStatus.InBlock
      const output = engine.collect(inBlock ? concat([SAVE, message, PROBE_FAIL, RESTORE]) : concat([message, PROBE_FAIL]))
      const copyIn = findFrame(output, Backend.CopyInResponse)
      if (copyIn) {
        engine.write(copyIn)
        this.#waiting = copy
        return true
      }
    }
    this.#next++
    const result = engine.forward(concat([message, PROBE_FAIL]), true, false)
    this.#status = result.status
    return false
  }

  /** Runs a BEGIN, COMMIT, ROLLBACK or SAVEPOINT of the client's. @returns false when it failed. */
  #runControl(engine: ScriptEngine, statement: SqlStatement, kind: TransactionControl): boolean {
    const message = this.#piece(statement, statement)
    if (this.#block === 'implicit') {
      if (kind === 'begin') {
        // In the implicit block BEGIN turns it into the client's block,
        // silently; in our explicit one it warns that a block is open.
        const output = engine.collect(message)
        let failed = false
        forEachFrame(output, (type, start, end) => {
          if (type === Backend.ReadyForQuery) this.#status = output[start]!
          else if (type === Backend.NoticeResponse && responseField(output, start, end, 'C') === ACTIVE_TRANSACTION) return
          else {
            if (type === Backend.ErrorResponse) failed = true
            engine.write(output.subarray(start - 5, end))
          }
        })
        this.#block = 'explicit'
        return !failed
      }
      // Out of the implicit block, COMMIT and ROLLBACK warn that no
      // transaction is in progress, as they do in it. The AND CHAIN and
      // savepoint forms fail there, and the implicit block's work is lost.
      const commit = kind === 'commit'
      const ended = this.#ours(engine, commit ? COMMIT : ROLLBACK, commit)
      this.#block = 'none'
      if (ended.failed) return false
    }
    const result = engine.forward(message, false, false)
    this.#status = result.status
    this.#block = result.status === TxStatus.Idle ? 'none' : 'explicit'
    return !result.failed
  }

  /**
   * Runs a statement of our own. With `keepOutput`, what it reports besides
   * its CommandComplete goes to the client (the error or notices of
   * deferred work when it commits the implicit block).
   */
  #ours(engine: ScriptEngine, message: Uint8Array, keepOutput: boolean): StepResult {
    const output = engine.collect(message)
    let failed = false
    forEachFrame(output, (type, start, end) => {
      if (type === Backend.ReadyForQuery) this.#status = output[start]!
      else if (type === Backend.ErrorResponse) failed = true
      if (keepOutput && type !== Backend.ReadyForQuery && type !== Backend.CommandComplete && type !== Backend.NotificationResponse) {
        engine.write(output.subarray(start - 5, end))
      }
    })
    return { failed, status: this.#status }
  }

  /** An error ended the query: Postgres skips the rest and rolls the implicit block back. */
  #fail(engine: ScriptEngine): boolean {
    this.#next = this.#statements.length
    if (this.#block === 'implicit') this.#ours(engine, ROLLBACK, false)
    this.#block = this.#status === TxStatus.Idle ? 'none' : 'explicit'
    return this.#end(engine)
  }

  #end(engine: ScriptEngine): boolean {
    this.#next = this.#statements.length
    // A PREPARE TRANSACTION may have ended the block before the last statement's CommandComplete was sent.
    engine.settleHeld(true)
    if (this.#ready) engine.write(readyForQuery(statusLetter(this.#status)))
    return false
  }

  /**
   * Whether the whole string passes Postgres's raw parser. Parse answers a
   * string that does with its refusal of several statements; the probe runs
   * in a savepoint inside a block, which the error would abort otherwise.
   */
  #parses(engine: ScriptEngine): boolean {
    const parse = concat([parseUnnamed(this.#sql), SYNC])
    const output = engine.collect(this.#status === TxStatus.InBlock ? concat([SAVE, parse, RESTORE]) : parse)
    let parses = false
    forEachFrame(output, (type, start, end) => {
      if (type !== Backend.ErrorResponse) return true
      parses =
        responseField(output, start, end, 'C') === MULTIPLE_COMMANDS.code &&
        responseField(output, start, end, 'R') === MULTIPLE_COMMANDS.routine
      return false
    })
    return parses
  }

  /**
   * A Query of the statements from `first` to `last`, the text before them
   * blanked out so that positions in errors count from the client's string
   * (Postgres counts characters: one space per code point).
   */
  #piece(first: SqlStatement, last: SqlStatement): Uint8Array {
    const before = this.#sql.slice(0, first.start).replace(/[^\n]/gu, ' ')
    return queryMessage(before + this.#sql.slice(first.start, last.end))
  }
}

function isOrdinary(statement: SqlStatement): boolean {
  return !statement.copiesFromClient && transactionControl(statement.words) === undefined
}

/** The first frame of `type` in `output`, header included, copied out. */
function findFrame(output: Uint8Array, type: number): Uint8Array | undefined {
  let found: Uint8Array | undefined
  forEachFrame(output, (t, start, end) => {
    if (t !== type) return true
    found = output.slice(start - 5, end)
    return false
  })
  return found
}
