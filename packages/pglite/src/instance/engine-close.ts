/** What `close()` does with the engine. */
import type { Backend } from '../engine/backend/backend.js'
import { recycleBackend } from '../engine/start/starter.js'

export interface EngineEnd {
  /** The database is stored (a directory or idb:// store), not only in memory. */
  readonly stored: boolean
  /** PGlite's `fs` option is set: its file system is closed after the engine. */
  readonly fsOption: boolean
  /** What the shutdown leaves for the next open (see `arrayTypesNote`). */
  note(): string | undefined
}

export function endEngine(backend: Backend, end: EngineEnd): void {
  // Nothing of an in-memory database is kept: its module goes back to
  // the pool for the next create() instead of a Postgres shutdown, or
  // is dropped when it cannot serve again (its shutdown checkpoint
  // would only write files nobody reads, and can fail at a memory
  // ceiling its heap already reached).
  const recycled = !end.stored && recycleBackend(backend)
  if (!recycled) {
    if (backend.inMemory && !end.stored && !end.fsOption) backend.abandon()
    else backend.shutdown(end.note())
  }
}
