/** `PGlite.clone()` in its turn: a copy of the engine's memory where it can be had, else of its files. */
import type { Backend } from '../engine/backend/backend.js'
import type { DataTree } from '../engine/files/pgdata-tree.js'
import type { QueryRunner } from '../query/runner.js'

/** What the new instance starts from. */
export type CloneSource = { readonly cloneOf: Backend } | { readonly loadDataTree: DataTree }

export interface CloneWays {
  /** The engine's memory can be copied (a snapshotable engine, no `initialMemory`, no transaction open). */
  readonly memoryCopy: boolean
  /** A failed memory copy falls back to the files (the instance has side modules). */
  readonly filesOnFailure: boolean
}

export async function cloneDatabase<D extends { lockSessionUser(role: string): Promise<void> }>(
  backend: Backend,
  runner: QueryRunner,
  ways: CloneWays,
  create: (source: CloneSource) => Promise<D>,
): Promise<D> {
  if (ways.memoryCopy) {
    // A memory-level copy: no startup; session state comes along, and so does a locked session user.
    let copy: D | undefined
    try {
      copy = await create({ cloneOf: backend })
    } catch (err) {
      // With side modules a module may not line up with the snapshot: then copy the files, as without a snapshot.
      if (!ways.filesOnFailure) throw err
    }
    if (copy) {
      if (backend.lockedSessionUser !== undefined) await copy.lockSessionUser(backend.lockedSessionUser)
      return copy
    }
  }
  runner.exec('CHECKPOINT', undefined)
  const tree: DataTree = backend.readDataTree()
  const copy = await create({ loadDataTree: tree })
  if (backend.lockedSessionUser !== undefined) await copy.lockSessionUser(backend.lockedSessionUser)
  return copy
}
