import { Frontend, TxStatus } from '@pgwasm/pglite/protocol'
import { sessionObjectsMayChange } from '../pooler/session-objects.js'
import { droppedDatabase, mayNeedInspection } from '../sql/listen.js'
import { splitIfCopyFromClient } from '../sql/copy-from-client.js'
import { BatchBuilder } from '../wire/batch.js'
import type { FrameReader } from '../wire/frame-reader.js'
import { StatementRenamer } from '../wire/rename.js'
import { EXTENDED_TYPES, decodeUtf8, errorResponse, readInt32, readyForQuery, statusLetter } from '../wire/wire.js'
import type { CacheGate } from './cache-gate.js'
import type { TransactionParking } from './transaction-parking.js'
import type { SessionCopyIn } from './copy-in.js'
import { aliasFrame, nulAfter, parsesCopyFromClient, withSql } from './frame-edits.js'
import type { SessionHost, Transport } from './session-host.js'
import { rewrittenSql, type RewriteClient } from './sql-rewrites.js'
import { PARSE_COMPLETE, sqlMayChangeMeaning } from './unnamed-cache.js'

/** How much of a statement's text `pg_stat_activity` keeps (Postgres's `track_activity_query_size` default). */
const ACTIVITY_SQL_BYTES = 1024
/** ReadyForQuery's status outside a transaction block. */
/**
 * An extended-protocol sequence is run before its Sync or Flush arrives only
 * once it is this large: until then it waits in the receive buffer and the
 * engine stays free for the others.
 */
const MAX_DEFERRED_BYTES = 16 * 1024 * 1024

/** What the frames read tell the session's next batch (it reads and resets them) and `pg_stat_activity`. */
export interface BatchMarks {
  /** The batch being gathered or run makes a named prepared statement (a Parse with a name). */
  namesStatement: boolean
  /** The batch closes a named statement or portal (a protocol Close). */
  closesObject: boolean
  /** SQL it sent may have made a temporary relation, a holdable cursor or an SQL-prepared statement (session-objects.ts). */
  objectsMayChange: boolean
  /** Its last SQL, as `pg_stat_activity` shows it. */
  activitySql: Uint8Array
}

/** What the frame loop needs of its session. */
export interface FrameLoopHost {
  readonly input: FrameReader
  readonly transport: Pick<Transport, 'write'>
  readonly server: Pick<SessionHost, 'syncTimeoutMs' | 'dropped'>
  readonly renamer: StatementRenamer
  readonly cacheGate: CacheGate
  readonly copy: SessionCopyIn
  readonly marks: BatchMarks
  /** What may keep the client's transaction block on the engine (transaction-parking.ts). */
  readonly parking: Pick<TransactionParking, 'notePartialExecute'>
  readonly rewriteClient: RewriteClient
  /** An extended-protocol sequence is open (no Sync after it yet). */
  unsynced: boolean
  readonly inTransaction: boolean
  /** The last ReadyForQuery status byte the client was sent. */
  readonly status: number
  isClosed(): boolean
  /** Past its startup: a client that keeps an extended sequence open is timed. */
  isReady(): boolean
  /** Notes the LISTEN or UNLISTEN in `sql`, if any: true when the batch changes this client's LISTENs. */
  noteListens(sql: string): boolean
  runBatch(message: Uint8Array, listenChanged: boolean, meaning?: boolean): Promise<void>
  close(): void
  fatal(code: string, message: string): void
}

/**
 * A client's frames as they arrive, read into batches for the engine: the
 * statement cache's rewrite first, then frame by frame the COPY modes, the
 * skip to Sync after an error of ours, SQL rewrites and statement renaming.
 */
export class FrameLoop {
  readonly #host: FrameLoopHost
  readonly #batch: BatchBuilder
  /** Whole extended-protocol frames wait in the input for their Sync or Flush. */
  #awaitingSync = false
  #skipToSync = false
  #syncTimer: ReturnType<typeof setTimeout> | undefined

  constructor(host: FrameLoopHost) {
    this.#host = host
    this.#batch = new BatchBuilder(host.input)
  }

  /** After our own error in an extended sequence: what the client sends up to its Sync is skipped, and the Sync answered. */
  skipToSync(): void {
    this.#skipToSync = true
  }

  /** The connection ended: no Sync is waited for. */
  stop(): void {
    this.#clearSyncTimer()
  }

  /**
   * Takes every whole frame in the buffer: runs of them go to the engine as
   * one batch; a COPY FROM STDIN query runs as a script (see CopyInScript).
   * Frames are read in place; a run of frames that pass unchanged is copied
   * out once, and only SQL that may need a look is decoded.
   */
  async read(): Promise<boolean> {
    this.#clearSyncTimer()
    this.#awaitingSync = false
    const host = this.#host
    const input = host.input
    // A refused cached statement is retried as sent, which is only safe where
    // its failure ends nothing but the implicit transaction: outside a block.
    if (host.status === TxStatus.Idle && !host.inTransaction && !host.unsynced && !host.copy.waiting && !this.#skipToSync) {
      const plan = host.cacheGate.begin(input)
      if (plan) {
        const key = plan.entry.keyBytes
        const nul = key.indexOf(0)
        host.marks.activitySql = key.subarray(0, Math.min(nul < 0 ? key.length : nul, ACTIVITY_SQL_BYTES))
        try {
          await host.runBatch(plan.message, false)
        } finally {
          host.cacheGate.end()
        }
        return true
      }
    }
    const batch = this.#batch
    let listenChanged = false
    let meaning = false
    let consumed = false
    let terminate = false
    let rejectCopy = false
    let activityNoted = false
    let dropped: string[] | undefined
    for (;;) {
      const size = input.peekFrame(true)
      if (size === 0) break
      const hadProgress = consumed
      consumed = true
      const buffer = input.bytes
      const at = input.offset
      const type = buffer[at]!
      if (type === Frontend.Terminate) {
        input.skip(size)
        terminate = true
        break
      }
      if (host.copy.dropsFailedData(type)) {
        input.skip(size)
        continue
      }
      if (host.copy.waiting) {
        // A view, not a copy: SessionCopyIn.take copies it into the request before it awaits anything.
        const frame = buffer.subarray(at, at + size)
        input.skip(size)
        if (!(await host.copy.take(frame))) break
        continue
      }
      if (this.#skipToSync) {
        // After our own error in an extended sequence, as Postgres would: skip to Sync.
        input.skip(size)
        if (type === Frontend.Sync) {
          this.#skipToSync = false
          host.unsynced = false
          host.transport.write(readyForQuery(statusLetter(host.status)))
        }
        continue
      }
      if (host.copy.extendedPending) {
        if (await host.copy.extendedStep(type, buffer, at, size)) continue
      }
      if (!host.unsynced && !host.inTransaction && EXTENDED_TYPES.has(type) && !this.#sequenceArrived()) {
        // Run the sequence only once its Sync (or Flush) is here: a client
        // that goes quiet in the middle of one must not hold the engine.
        this.#awaitingSync = true
        consumed = hadProgress
        break
      }
      /** This frame with its SQL made safe (sql-rewrites.ts), when it had to be. */
      let replaced: Uint8Array | undefined
      if (type === Frontend.Query || type === Frontend.Parse) {
        const end = at + size
        const sqlStart = type === Frontend.Query ? at + 5 : nulAfter(buffer, at + 5, end) + 1
        const sqlEnd = nulAfter(buffer, sqlStart, end)
        if (!meaning && sqlMayChangeMeaning(buffer, sqlStart, sqlEnd)) meaning = true
        if (type === Frontend.Parse && buffer[at + 5] !== 0) host.marks.namesStatement = true
        // pg_stat_activity's query: the batch's first statement, copied once (a pipeline holds hundreds).
        if (!activityNoted) {
          host.marks.activitySql = buffer.slice(sqlStart, Math.min(sqlEnd, sqlStart + ACTIVITY_SQL_BYTES))
          activityNoted = true
        }
        if (!host.marks.objectsMayChange && sessionObjectsMayChange(buffer, sqlStart, sqlEnd)) host.marks.objectsMayChange = true
        if (mayNeedInspection(buffer, sqlStart, sqlEnd)) {
          const sql = decodeUtf8(buffer.subarray(sqlStart, sqlEnd))
          const changesListens = host.noteListens(sql)
          const drop = droppedDatabase(sql)
          if (drop) (dropped ??= []).push(drop)
          const copyScript = splitIfCopyFromClient(sql)
          if (copyScript && type === Frontend.Parse) {
            input.skip(size)
            // The engine cannot wait for COPY data in the middle of an extended
            // sequence (it would fail the COPY and lose the Sync): the COPY runs
            // as a simple Query's would, its messages answered here (SessionCopyIn.extendedStep).
            if (copyScript.length !== 1 || buffer[at + 5] !== 0) {
              rejectCopy = true
              break
            }
            if (!batch.isEmpty) await host.runBatch(batch.take(), listenChanged, meaning)
            listenChanged = false
            meaning = false
            host.unsynced = false
            if (host.isClosed()) break
            host.copy.parsed(sql, copyScript)
            host.transport.write(PARSE_COMPLETE)
            continue
          }
          if (copyScript) {
            input.skip(size)
            if (!batch.isEmpty) await host.runBatch(batch.take(), listenChanged, meaning)
            listenChanged = false
            meaning = false
            host.unsynced = false
            if (host.isClosed()) break
            await host.copy.start(sql, copyScript, changesListens)
            continue
          }
          if (changesListens) listenChanged = true
        }
        const sql = rewrittenSql(buffer, sqlStart, sqlEnd, host.rewriteClient)
        if (sql !== undefined) replaced = withSql(buffer, at, size, sqlStart, sqlEnd, sql)
      }
      if (type === Frontend.Close && buffer[at + 6] !== 0) host.marks.closesObject = true
      // An Execute of some rows only: the portal may be executed on after a Sync, in the same block.
      else if (type === Frontend.Execute && executesSomeRows(buffer, at, size)) host.parking.notePartialExecute()
      if (EXTENDED_TYPES.has(type)) host.unsynced = true
      else if (type === Frontend.Sync || type === Frontend.Query) host.unsynced = false
      const alias = host.cacheGate.aliasFor(type, buffer, at)
      if (EXTENDED_TYPES.has(type) && !StatementRenamer.namesNothing(type, buffer, at)) {
        // A named portal is renamed first; the unnamed statement stays empty there for the alias.
        const taken = replaced ?? input.take(size)
        if (replaced) input.skip(size)
        const renamed = host.renamer.rewrite(type, taken)
        batch.add(alias ? aliasFrame(renamed, 0, renamed.length, alias) : renamed)
      } else if (alias) {
        batch.add(replaced ? aliasFrame(replaced, 0, replaced.length, alias) : aliasFrame(buffer, at, size, alias))
        input.skip(size)
      } else if (replaced) {
        batch.add(replaced)
        input.skip(size)
      } else {
        batch.passOver(size)
      }
    }
    if (!batch.isEmpty) {
      const message = batch.take()
      // A framing error above closed the session: what came before it does not run.
      if (!host.isClosed()) await host.runBatch(message, listenChanged, meaning)
    }
    if (rejectCopy) {
      this.#skipToSync = true
      host.transport.write(
        errorResponse('0A000', 'COPY FROM STDIN is not supported in the extended query protocol here; send it as a simple Query'),
      )
    }
    if (dropped) for (const name of dropped) host.server.dropped(name)
    if (terminate) {
      host.close()
      return false
    }
    if ((host.unsynced || this.#awaitingSync) && host.isReady()) this.#armSyncTimer()
    return consumed
  }

  /**
   * Whether the extended-protocol sequence that starts at the input's offset
   * has its Sync or Flush (or any other message that ends it) among the whole
   * frames received, or has grown past {@link MAX_DEFERRED_BYTES}. Reads
   * only frame headers; a bad header counts as arrived, for the frame loop to refuse.
   */
  #sequenceArrived(): boolean {
    const input = this.#host.input
    const buffer = input.bytes
    const start = input.offset
    const end = start + input.buffered
    let at = start
    let copies = false
    while (at + 5 <= end) {
      const type = buffer[at]!
      if (type === Frontend.Flush || !EXTENDED_TYPES.has(type)) return true
      const length = readInt32(buffer, at + 1) >>> 0
      if (length < 4) return true
      if (at + 1 + length > end) return false
      // A COPY FROM STDIN's Execute waits for its data before any Sync comes.
      if (type === Frontend.Parse) copies = parsesCopyFromClient(buffer, at, at + 1 + length)
      else if (type === Frontend.Execute && copies) return true
      at += 1 + length
      if (at - start > MAX_DEFERRED_BYTES) return true
    }
    return false
  }

  #armSyncTimer(): void {
    this.#clearSyncTimer()
    const ms = this.#host.server.syncTimeoutMs
    if (ms <= 0) return
    this.#syncTimer = setTimeout(() => {
      this.#host.fatal('08P01', `no Sync within ${ms} ms after an extended-protocol message; the session was rolled back`)
    }, ms)
    this.#syncTimer.unref?.()
  }

  #clearSyncTimer(): void {
    if (this.#syncTimer) clearTimeout(this.#syncTimer)
    this.#syncTimer = undefined
  }
}

/** Whether the Execute frame at `at` asks for a number of rows (not all of them). */
function executesSomeRows(buffer: Uint8Array, at: number, size: number): boolean {
  const maxRows = nulAfter(buffer, at + 5, at + size) + 1
  return maxRows + 4 <= at + size && readInt32(buffer, maxRows) !== 0
}
