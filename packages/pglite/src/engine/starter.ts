import type { EngineAssets } from './assets.js'
import { Backend, BlankModule, type BackendOptions } from './backend.js'
import { backendEnv } from './module.js'
import type { EngineSnapshot } from './snapshot.js'

const PAGE = 65536

/**
 * Snapshots of freshly started backends, by everything that shaped them
 * (template, user, database, arguments): the second in-memory database of a
 * process is a restore, not a Postgres startup (fast-start.md §7).
 */
const snapshots = new Map<string, EngineSnapshot>()

/**
 * Blank modules made ahead of time, in the background, so that a restore
 * does not wait for module creation (~70-100 ms of a ~90 ms restore).
 */
class ModulePool {
  #ready: BlankModule[] = []
  #filling: Promise<void> | undefined
  #pages = 0

  /** Sets the module size to keep ready and starts making one. */
  prepare(assets: EngineAssets, pages: number): void {
    if (pages !== this.#pages) this.#drain(pages)
    this.fill(assets)
  }

  async take(assets: EngineAssets, pages: number): Promise<BlankModule> {
    if (pages !== this.#pages) this.#drain(pages)
    // One being made is nearer done than a new one would be.
    if (this.#ready.length === 0 && this.#filling) await this.#filling
    const blank = this.#ready.pop()
    this.fill(assets)
    return blank ?? BlankModule.create(assets, backendEnv('postgres', 'postgres'), pages * PAGE)
  }

  /** Starts making one blank module if none is ready or being made. */
  fill(assets: EngineAssets): void {
    if (this.#ready.length > 0 || this.#filling || this.#pages === 0) return
    const pages = this.#pages
    // Start after the current task, so the create that triggered it returns first.
    this.#filling = new Promise<void>((resolve) => setTimeout(resolve, 0))
      .then(() => BlankModule.create(assets, backendEnv('postgres', 'postgres'), pages * PAGE))
      .then(
        (blank) => {
          if (pages === this.#pages) this.#ready.push(blank)
          else blank.discard()
        },
        () => {
          // A failed prefill only costs the next create its head start.
        },
      )
      .finally(() => {
        this.#filling = undefined
      })
  }

  #drain(pages: number): void {
    for (const blank of this.#ready) blank.discard()
    this.#ready = []
    this.#pages = pages
  }
}

const pool = new ModulePool()

export interface MemoryStartOptions extends BackendOptions {
  /** Identifies the data tree (e.g. the template id); same key, same snapshot. */
  readonly treeKey: string
}

/** Starts an in-memory backend: a snapshot restore when one fits, else a boot that leaves one. */
export async function startInMemory(assets: EngineAssets, options: MemoryStartOptions): Promise<Backend> {
  const key = JSON.stringify([options.treeKey, options.username, options.database, options.startArgs])
  const snapshot = options.initialMemory === undefined ? snapshots.get(key) : undefined
  if (snapshot) {
    const blank = await pool.take(assets, snapshot.pages)
    return Backend.restore(blank, snapshot, options.onLog)
  }
  const backend = await Backend.start(assets, options)
  if (options.initialMemory === undefined && backend.isSnapshotable && !snapshots.has(key)) {
    const taken = backend.snapshot()
    snapshots.set(key, taken)
    pool.prepare(assets, taken.pages)
  }
  return backend
}

/** A new backend with the same state as `source` (idle, no side module loaded). */
export async function restoreCopy(assets: EngineAssets, source: Backend, onLog?: (line: string) => void): Promise<Backend> {
  const snapshot = source.snapshot()
  const blank = await pool.take(assets, snapshot.pages)
  return Backend.restore(blank, snapshot, onLog)
}
