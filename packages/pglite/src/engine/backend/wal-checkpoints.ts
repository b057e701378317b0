/**
 * Checkpoints for a backend that has no checkpointer. Postgres in
 * single-user mode asks for a checkpoint only at shutdown (XLogWrite's
 * "too much WAL" request is for a postmaster's checkpointer), so every WAL
 * segment since the open stayed: an in-memory database that wrote 1 GB
 * held 1 GB of WAL in memory until it closed, a directory held it on disk,
 * and a crash replayed all of it. Between requests, when the session is
 * idle and `pg_wal` has grown by {@link SEGMENTS_PER_CHECKPOINT} segments
 * since the last checkpoint, one runs; Postgres then recycles or removes
 * the segments it no longer needs (as many as `max_wal_size` allows stay).
 */

import { FrameWriter } from '../wire/frame-writer.js'

/**
 * New segments (16 MB each by default) that make a checkpoint due: in
 * memory, four (WAL is memory there); on a directory, sixteen, since each
 * checkpoint there writes and fsyncs every file it dirtied (75-120 ms
 * measured) and runs inside the request that crossed the line.
 */
export const SEGMENTS_PER_CHECKPOINT = { memory: 4, directory: 16 } as const

/** How often `pg_wal` is looked at, at most: on a directory that is a `readdir`. */
const LOOK_EVERY_MS = 200

const STATEMENT = 'pgwasm_checkpoint'

/**
 * Parse of a named statement, Bind, Execute, Close and Sync: a simple Query
 * or an unnamed Parse would drop the session's unnamed statement, which a
 * client may still Bind. A Close of the name goes first: SQL that prepared
 * a statement by that name would otherwise fail every Parse, and with it
 * every checkpoint.
 */
export const CHECKPOINT_REQUEST: Uint8Array = new FrameWriter()
  .close('S', STATEMENT)
  .parse(STATEMENT, 'CHECKPOINT')
  .bind('', STATEMENT, [])
  .execute()
  .close('S', STATEMENT)
  .sync()
  .view()
  .slice()

/** When a checkpoint is due, from the count of entries in `pg_wal`. */
export class CheckpointSchedule {
  readonly #countWal: () => number
  readonly #segments: number
  #baseline: number | undefined
  #lookedAt = -Infinity

  constructor(countWal: () => number, segments: number) {
    this.#countWal = countWal
    this.#segments = segments
  }

  /** Whether one is due at `now` (ms); call only while the session is idle. */
  due(now: number): boolean {
    if (now - this.#lookedAt < LOOK_EVERY_MS) return false
    this.#lookedAt = now
    const count = this.#countWal()
    if (this.#baseline === undefined || count < this.#baseline) {
      this.#baseline = count
      return false
    }
    return count >= this.#baseline + this.#segments
  }

  /**
   * After a checkpoint ran (or failed: a session user without the right to
   * checkpoint tries again only after as many new segments).
   */
  ran(): void {
    this.#baseline = this.#countWal()
  }
}
