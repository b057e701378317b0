import { collectGarbageNow, collectGarbageSoon } from '../backend/collect-garbage.js'
import type { EngineAssets } from '../loading/assets.js'
import { Backend, DEFAULT_MEMORY } from '../backend/backend.js'
import type { BackendOptions } from '../backend/backend-types.js'
import { BlankModule } from '../backend/blank-module.js'
import { backendEnv } from '../backend/module.js'
import { inNode } from '../node-builtin.js'
import type { PostgresModule } from '../emscripten.js'
import type { EngineSnapshot } from './snapshot.js'
import { decodeSnapshot, encodeSnapshot } from './snapshot-codec.js'
import type { DataTree } from '../files/pgdata-tree.js'
import { notePrepared } from './dynamic-links.js'
import { contribDiskId, forgetContribReads, forgetContribSnapshot, readContribSnapshot, readWhileMaking, saveContribSnapshot, type ContribStart } from './contrib-disk.js'

const PAGE = 65536

/**
 * What a module is prepared with before Postgres starts, on the start paths
 * that keep such modules and their snapshots: files and side modules (the
 * contrib bundles, which extensions/contrib.ts installs). Modules and
 * snapshots are shared between preloads of one `key`: it must stand for
 * the same side modules, installed in the same order, as their memory must
 * line up.
 */
export interface ModulePreload {
  readonly key: string
  install(mod: PostgresModule): Promise<void>
}

/**
 * Snapshots of freshly started backends, by everything that shaped them
 * (template, user, database, arguments): the second in-memory database of a
 * process is a restore, not a Postgres startup.
 */
const snapshots = new Map<string, EngineSnapshot>()

/**
 * Pages a pooled module has beyond the snapshot that sized the pool: a
 * database that grew a little since its start (a seeded database being
 * cloned) still fits a module made ahead of time. Untouched pages cost
 * address space, not memory.
 */
const HEADROOM_PAGES = 512

/**
 * How long a prefill waits before making a module (~100-200 ms of this
 * thread): the create that asked returns first, and a database closed
 * meanwhile gives its module back instead (a test's reset, a clone used and
 * closed at once). A take that finds nothing ready starts it at once.
 */
const FILL_DELAY_MS = 300

/**
 * Blank modules made ahead of time, in the background, so that a restore
 * does not wait for module creation (~70-100 ms of a ~90 ms restore).
 */
class ModulePool {
  #ready: BlankModule[] = []
  #filling: Promise<void> | undefined
  /** Takes waiting for a module: woken by a fill's end or a give. */
  #waiters: (() => void)[] = []
  /** Modules given back so far. */
  #gives = 0
  /** Starts the waiting prefill now (a take found nothing ready). */
  #startFill: (() => void) | undefined
  /** Size of the modules made: the largest snapshot seen, plus headroom. */
  #pages = 0
  /** Makes one module of `bytes`, as the pool's restores need it (plain, or with side modules preloaded). */
  readonly #make: (assets: EngineAssets, bytes: number) => Promise<BlankModule>

  /**
   * A module given back serves any later take: a take waiting for a module
   * is served by the first given back, and a prefill waits
   * {@link FILL_DELAY_MS} and is dropped if one comes back meanwhile. So do
   * modules with side modules preloaded, which serve any snapshot whose
   * links replay in them (else the restore takes a new one).
   */
  constructor(make: (assets: EngineAssets, bytes: number) => Promise<BlankModule>) {
    this.#make = make
  }

  /**
   * Makes the pool's modules fit snapshots of `pages`. Nothing is made yet:
   * a process that opens one database should not pay for a second module;
   * the first `take` starts the prefilling.
   */
  prepare(pages: number): void {
    if (pages > this.#pages) this.#resize(Math.max(pages + HEADROOM_PAGES, DEFAULT_MEMORY / PAGE))
  }

  /**
   * A blank module of at least `pages`: a ready one, else whichever comes
   * first of the one being made and one a closing database gives back (a
   * test's reset closes the old copy while the next one waits).
   * @param prefill Whether to make the next module ahead of time.
   */
  async take(assets: EngineAssets, pages: number, prefill = true): Promise<BlankModule> {
    this.prepare(pages)
    if (this.#ready.length === 0) await this.#moduleComing(assets)
    const blank = this.#ready.pop()
    if (prefill) this.fill(assets)
    // None made (a failed fill, or the pool resized meanwhile): made here, where a failure is seen.
    return blank ?? this.#make(assets, this.#pages * PAGE)
  }

  /** Resolves when a module may be ready: one being made is nearer done than a new one would be. */
  #moduleComing(assets: EngineAssets): Promise<void> | undefined {
    this.fill(assets)
    this.#startFill?.()
    const filling = this.#filling
    if (!filling) return undefined
    // Or one a closing database gives back first.
    return new Promise<void>((resolve) => {
      this.#waiters.push(resolve)
      void filling.then(resolve)
    })
  }

  /** Takes back a module whose database closed; keeps it if it is large enough and the pool is not full. */
  give(blank: BlankModule): void {
    const pages = blank.mod.HEAPU8.byteLength / PAGE
    if (pages >= this.#pages && this.#ready.length < MAX_READY) this.#ready.push(blank)
    else blank.discard()
    this.#gives++
    this.#wake()
  }

  /** Makes one blank module a little later (see the constructor), if none is ready or being made. */
  fill(assets: EngineAssets): void {
    if (this.#ready.length > 0 || this.#filling || this.#pages === 0) return
    const pages = this.#pages
    const gives = this.#gives
    let start!: () => void
    const started = new Promise<void>((resolve) => (start = resolve))
    const timer = setTimeout(start, FILL_DELAY_MS)
    // A module made ahead of time is no reason for a process to stay up.
    ;(timer as { unref?: () => void }).unref?.()
    this.#startFill = () => {
      clearTimeout(timer)
      start()
    }
    this.#filling = started
      .then(() => {
        this.#startFill = undefined
        // Given one back meanwhile: databases are being closed and reopened, and their modules go round.
        const goingRound = this.#gives !== gives && this.#waiters.length === 0
        return this.#ready.length > 0 || goingRound ? undefined : this.#make(assets, pages * PAGE)
      })
      .then(
        (blank) => {
          if (!blank) return
          // Made ahead of time (no take waits for it): map its pages now, not during a restore.
          if (this.#waiters.length === 0) mapEveryPage(blank.mod.HEAPU8)
          if (pages >= this.#pages) this.#ready.push(blank)
          else blank.discard()
        },
        () => {
          // A failed prefill only costs the next create its head start.
        },
      )
      .finally(() => {
        this.#filling = undefined
        this.#wake()
      })
  }

  #wake(): void {
    for (const resolve of this.#waiters.splice(0)) resolve()
  }

  /** Forgets every module (for tests). */
  clear(): void {
    this.#resize(0)
  }

  #resize(pages: number): void {
    for (const blank of this.#ready) blank.discard()
    this.#ready = []
    this.#pages = pages
  }
}

/**
 * Reads one byte of every 4 KiB page, so the OS maps them all (to its shared
 * zero page: no memory is used) now, in the background, rather than one
 * fault at a time when a restore or a later snapshot first scans the module
 * for non-zero chunks (~40 ms over a module's ~170 MB).
 */
function mapEveryPage(heap: Uint8Array): void {
  let sink = 0
  for (let i = 0; i < heap.length; i += 4096) sink |= heap[i]!
  if (sink === -1) throw new Error('unreachable')
}

/** Recycled modules kept at most: each holds its whole memory (100+ MB). */
const MAX_READY = 2

const pool = new ModulePool((assets, bytes) => BlankModule.create(assets, backendEnv('postgres', 'postgres'), bytes))

/**
 * Closes an in-memory backend by handing its module to the pool (see
 * `Backend.recycle`); false when it could not, and the caller shuts it down.
 */
export function recycleBackend(backend: Backend): boolean {
  const blank = backend.recycle()
  if (!blank) return false
  if (blank.control.links.preparedTable === undefined) pool.give(blank)
  else {
    // Its side modules are preloaded already: the next database with the same preload takes it.
    const key = preloadKeys.get(blank.mod)
    const preloaded = key === undefined ? undefined : preloadedPools.get(key)
    recycledBlanks.add(blank)
    if (preloaded) preloaded.give(blank)
    else blank.discard()
  }
  return true
}

export interface MemoryStartOptions extends Omit<BackendOptions, 'mount'> {
  /** Identifies the data tree (e.g. the template id); same key, same snapshot. */
  readonly treeKey: string
  /** The data tree, loaded only when Postgres must boot. */
  readonly loadTree: () => Promise<DataTree>
  /** Where snapshots are kept across processes; `false`: memory only. */
  readonly cacheDir?: string | false
}

/**
 * Starts an in-memory backend: a restore of this process's snapshot, else of
 * the disk cache's, else a boot that leaves a snapshot in both.
 */
export async function startInMemory(assets: EngineAssets, options: MemoryStartOptions): Promise<Backend> {
  const key = snapshotKey(options)
  if (options.initialMemory === undefined) {
    const snapshot = snapshots.get(key) ?? (await prefetchSnapshot(options))
    if (snapshot) {
      try {
        const blank = await pool.take(assets, snapshot.pages)
        return Backend.restore(blank, snapshot, options.onLog)
      } catch {
        // A snapshot this build cannot restore: forget it and boot instead.
        snapshots.delete(key)
        void forgetOnDisk(key, options.cacheDir)
      }
    }
  }
  const backend = await boot(assets, options)
  if (options.initialMemory === undefined && backend.isSnapshotable && !snapshots.has(key)) {
    const taken = backend.snapshot()
    snapshots.set(key, taken)
    pool.prepare(taken.pages)
    const restored = await restoredInstead(assets, backend, taken, options)
    // After the save too: its encoding leaves garbage as large as the snapshot.
    void saveToDisk(key, taken, options.cacheDir).then(collectGarbageSoon)
    return restored
  }
  return backend
}

/**
 * A booted module keeps resident every page Postgres zeroed as it started
 * (its buffer pool, ~35 MB), which a restore never touches: a process whose
 * first database booted (a first start after install) held ~20-35% more
 * memory for its whole life than one that restored. The booted backend gives
 * way to a restore of its own start-up snapshot (~70-100 ms, once per
 * install and options). Its module is let go and collected before the
 * restore's module is made: the two at once were the process's peak.
 * Should the restore fail, Postgres boots again.
 */
async function restoredInstead(assets: EngineAssets, booted: Backend, snapshot: EngineSnapshot, options: MemoryStartOptions): Promise<Backend> {
  booted.abandon()
  collectGarbageNow()
  try {
    // No module made ahead of time for it: a booted first database never asked for one.
    return Backend.restore(await pool.take(assets, snapshot.pages, false), snapshot, options.onLog)
  } catch {
    return boot(assets, options)
  }
}

/** Postgres started on the template's tree, in memory. */
async function boot(assets: EngineAssets, options: MemoryStartOptions): Promise<Backend> {
  return Backend.start(assets, { ...options, mount: { kind: 'memory', tree: await options.loadTree() } })
}

export type SnapshotKeyParts = Pick<MemoryStartOptions, 'treeKey' | 'username' | 'database' | 'startArgs' | 'cacheDir'>

function snapshotKey(o: SnapshotKeyParts): string {
  return JSON.stringify([SNAPSHOT_FORMAT, o.treeKey, o.username, o.database, o.startArgs])
}

/**
 * A saved state: the snapshot of a database that some setup (a schema, seed
 * rows) left, under the caller's key and everything the start-up snapshot
 * is keyed by.
 */
function savedStateKey(o: SnapshotKeyParts, key: string): string {
  return JSON.stringify([SNAPSHOT_FORMAT, 'saved-state', key, o.treeKey, o.username, o.database, o.startArgs])
}

/**
 * A backend restored from the saved state `key`, from this process or the
 * disk cache, with the note saved beside it; undefined when there is none.
 */
export async function restoreSavedState(
  assets: EngineAssets,
  o: SnapshotKeyParts,
  key: string,
  onLog?: (line: string) => void,
): Promise<{ backend: Backend; note: string | undefined } | undefined> {
  const id = savedStateKey(o, key)
  const snapshot = await readOnce(id, o.cacheDir)
  if (!snapshot) return undefined
  try {
    const blank = await pool.take(assets, snapshot.pages)
    return { backend: Backend.restore(blank, snapshot, onLog), note: snapshot.note }
  } catch {
    // One this build cannot restore: the caller runs the setup again and saves anew.
    snapshots.delete(id)
    await forgetOnDisk(id, o.cacheDir)
    return undefined
  }
}

/** Saves `backend` (idle, no side module loaded) and `note` as the state `key`, in this process and the disk cache. */
export async function saveState(o: SnapshotKeyParts, key: string, backend: Backend, note: string): Promise<void> {
  const id = savedStateKey(o, key)
  const taken = { ...backend.snapshot(), note }
  snapshots.set(id, taken)
  pool.prepare(taken.pages)
  await saveToDisk(id, taken, o.cacheDir)
}

const diskReads = new Map<string, Promise<EngineSnapshot | undefined>>()

/**
 * Starts reading the disk snapshot for these options (once per process), so
 * the read overlaps with compiling the engine.
 */
export function prefetchSnapshot(o: SnapshotKeyParts): Promise<EngineSnapshot | undefined> {
  return readOnce(snapshotKey(o), o.cacheDir)
}

/**
 * Starts reading the saved state `key` (see {@link restoreSavedState}) from
 * the disk cache, once per process, so the read overlaps with compiling the
 * engine, as a plain first create's snapshot read does.
 */
export function prefetchSavedState(o: SnapshotKeyParts, key: string): Promise<EngineSnapshot | undefined> {
  return readOnce(savedStateKey(o, key), o.cacheDir)
}

/** This process's snapshot `id`, else the disk read of it under way, else a new one. */
function readOnce(id: string, cacheDir: string | false | undefined): Promise<EngineSnapshot | undefined> {
  if (snapshots.has(id)) return Promise.resolve(snapshots.get(id))
  let read = diskReads.get(id)
  if (!read) {
    read = loadFromDisk(id, cacheDir).catch(() => undefined)
    diskReads.set(id, read)
    void read.then(() => diskReads.delete(id))
  }
  return read
}

/** Bump when what a snapshot holds or how it is encoded changes. */
const SNAPSHOT_FORMAT = 6

async function diskLocation(key: string, cacheDir: string | false | undefined): Promise<{ dir: string; file: string } | undefined> {
  if (cacheDir === false || !inNode) return undefined
  const disk = await import('./template-disk.js')
  const dir = cacheDir ?? (await disk.defaultCacheDir())
  return { dir, file: await disk.templatePath(dir, key, 'snapshot') }
}

async function loadFromDisk(key: string, cacheDir: string | false | undefined): Promise<EngineSnapshot | undefined> {
  const where = await diskLocation(key, cacheDir)
  if (!where) return undefined
  const disk = await import('./template-disk.js')
  const cached = await disk.readVerified(where.file)
  // An empty cache (a first run after install) starts from the snapshot the package build made, where the key is its.
  const shipped = cached ? undefined : await disk.readShipped(where.dir, where.file)
  const bytes = cached ?? shipped?.body
  if (!bytes) return undefined
  try {
    const snapshot = decodeSnapshot(bytes)
    snapshots.set(key, snapshot)
    shipped?.keep()
    return snapshot
  } catch {
    await forgetOnDisk(key, cacheDir)
    return undefined
  }
}

async function saveToDisk(key: string, snapshot: EngineSnapshot, cacheDir: string | false | undefined): Promise<void> {
  try {
    const where = await diskLocation(key, cacheDir)
    if (!where) return
    const disk = await import('./template-disk.js')
    await disk.writeAtomically(where.dir, where.file, encodeSnapshot(snapshot))
  } catch {
    // An unwritable cache costs the next process its head start, nothing else.
  }
}

async function forgetOnDisk(key: string, cacheDir: string | false | undefined): Promise<void> {
  const where = await diskLocation(key, cacheDir).catch(() => undefined)
  if (!where) return
  const { unlink } = await import('node:fs/promises')
  await unlink(where.file).catch(() => {})
}

/**
 * A new backend with the same state as `source` (idle; side modules only as
 * `preload` installed them, which the copy preloads the same way).
 */
export async function restoreCopy(assets: EngineAssets, source: Backend, onLog: ((line: string) => void) | undefined, preload: ModulePreload): Promise<Backend> {
  const snapshot = source.snapshot()
  if (snapshot.links) return restoreWithContrib(assets, snapshot, preload, backendEnv('postgres', 'postgres'), onLog)
  const blank = await pool.take(assets, snapshot.pages)
  return Backend.restore(blank, snapshot, onLog)
}

/**
 * Snapshots of just-started backends with contrib side modules preloaded,
 * by start options and preload key; the disk cache keeps them by a digest
 * of the bundles' bytes (contrib-disk.ts).
 */
const contribSnapshots = new Map<string, EngineSnapshot>()

/**
 * Starts an in-memory backend with `preload` installed: a restore of this
 * process's snapshot for the same options, or the disk cache's, else a boot
 * that leaves one in both.
 */
export async function startWithContrib(
  assets: EngineAssets,
  options: MemoryStartOptions,
  preload: ModulePreload,
  start: ContribStart = {},
): Promise<Backend> {
  const key = JSON.stringify([snapshotKey(options), preload.key])
  const diskId = contribDiskId(snapshotKey(options), start)
  const env = backendEnv(options.username, options.database)
  let snapshot = contribSnapshots.get(key)
  let early: Promise<BlankModule> | undefined
  if (!snapshot && diskId !== undefined) [snapshot, early] = await readWhileMaking(assets, preloadedPoolFor(preload, env), readContribSnapshot(diskId, options.cacheDir))
  if (snapshot) {
    try {
      const backend = await restoreWithContrib(assets, snapshot, preload, env, options.onLog, start.newModule, early)
      contribSnapshots.set(key, snapshot)
      return backend
    } catch {
      // Its modules did not line up: boot, and keep the new snapshot instead.
      contribSnapshots.delete(key)
      if (diskId !== undefined) await forgetContribSnapshot(diskId, options.cacheDir)
    }
  }
  const tree = await options.loadTree()
  const backend = await Backend.start(assets, { ...options, mount: { kind: 'memory', tree }, prepare: (mod) => preloadContrib(mod, preload) })
  if (backend.isSnapshotable && !contribSnapshots.has(key)) {
    const taken = backend.snapshot()
    contribSnapshots.set(key, taken)
    // Sized now, so that this database's module, once closed, serves the next one.
    preloadedPoolFor(preload, env).prepare(taken.pages)
    // After the create returns: encoding leaves garbage as large as the snapshot.
    if (diskId !== undefined) void saveContribSnapshot(diskId, taken, options.cacheDir).then(collectGarbageSoon)
  }
  return backend
}

/** What `createCached` kept of a database with contrib modules after its setup, by start, preload and key (in this process). */
const contribStates = new Map<string, { readonly snapshot: EngineSnapshot; readonly note: string | undefined }>()

function contribStateKey(options: MemoryStartOptions, preload: ModulePreload, key: string): string {
  return JSON.stringify([snapshotKey(options), preload.key, key])
}

/**
 * Keeps `backend` (set up by `createCached`, its side modules only the
 * preloaded ones) for {@link restoreContribState}, in this process and,
 * with a digest of the bundles, in the disk cache.
 */
export async function saveContribState(
  options: MemoryStartOptions,
  preload: ModulePreload,
  key: string,
  backend: Backend,
  note: string | undefined,
  start: ContribStart = {},
): Promise<void> {
  if (!backend.isSnapshotable) return
  const snapshot = { ...backend.snapshot(), ...(note !== undefined ? { note } : {}) }
  contribStates.set(contribStateKey(options, preload, key), { snapshot, note })
  preloadedPoolFor(preload, backendEnv(options.username, options.database)).prepare(snapshot.pages)
  const diskId = contribDiskId(snapshotKey(options), start, key)
  if (diskId !== undefined) await saveContribSnapshot(diskId, snapshot, options.cacheDir)
}

/** A copy of the database {@link saveContribState} kept under `key` (in this process, else on disk), or undefined (none, or it did not line up). */
export async function restoreContribState(
  assets: EngineAssets,
  options: MemoryStartOptions,
  preload: ModulePreload,
  key: string,
  start: ContribStart = {},
): Promise<{ backend: Backend; note: string | undefined } | undefined> {
  const id = contribStateKey(options, preload, key)
  const diskId = contribDiskId(snapshotKey(options), start, key)
  const env = backendEnv(options.username, options.database)
  let saved = contribStates.get(id)
  let early: Promise<BlankModule> | undefined
  if (!saved && diskId !== undefined) {
    const [snapshot, making] = await readWhileMaking(assets, preloadedPoolFor(preload, env), readContribSnapshot(diskId, options.cacheDir))
    if (snapshot) [saved, early] = [{ snapshot, note: snapshot.note }, making]
  }
  if (!saved) return undefined
  try {
    const backend = await restoreWithContrib(assets, saved.snapshot, preload, env, options.onLog, false, early)
    contribStates.set(id, saved)
    return { backend, note: saved.note }
  } catch {
    // The caller runs the setup again and saves anew.
    contribStates.delete(id)
    if (diskId !== undefined) await forgetContribSnapshot(diskId, options.cacheDir)
    return undefined
  }
}

/** Starts reading the disk cache's state `savedState` (else start-up snapshot) for these options and bundles, to overlap the engine's compile. */
export function prefetchContrib(options: SnapshotKeyParts, start: ContribStart, savedState?: string): void {
  const id = contribDiskId(snapshotKey(options), start, savedState)
  if (id !== undefined) void readContribSnapshot(id, options.cacheDir)
}

/**
 * A module with the side modules preloaded in the same order as the
 * snapshot's were (`early`, one made while the snapshot was read, else the
 * pool's: one a closed database gave back, or a new one), then the
 * snapshot and its links. `newModule`: one that served no database.
 * @throws EngineError when the module does not line up with the snapshot.
 */
async function restoreWithContrib(
  assets: EngineAssets,
  snapshot: EngineSnapshot,
  preload: ModulePreload,
  env: Record<string, string>,
  onLog: ((line: string) => void) | undefined,
  newModule = false,
  early?: Promise<BlankModule>,
): Promise<Backend> {
  const pool = preloadedPoolFor(preload, env)
  let blank = (await early) ?? (await pool.take(assets, snapshot.pages))
  if (blank.mod.HEAPU8.byteLength < snapshot.pages * PAGE) {
    pool.give(blank)
    blank = await pool.take(assets, snapshot.pages)
  }
  if (newModule && recycledBlanks.has(blank)) {
    pool.give(blank)
    blank = await makePreloaded(assets, preload, env, Math.max(DEFAULT_MEMORY, snapshot.pages * PAGE))
  }
  if (!recycledBlanks.has(blank)) return Backend.restore(blank, snapshot, onLog)
  try {
    return Backend.restore(blank, snapshot, onLog)
  } catch {
    // A module that served another snapshot may hold other functions where this one needs its own: a fresh one has none.
    return Backend.restore(await makePreloaded(assets, preload, env, Math.max(DEFAULT_MEMORY, snapshot.pages * PAGE)), snapshot, onLog)
  }
}

/** Modules that served a database before (see recycleBackend). */
const recycledBlanks = new WeakSet<BlankModule>()

/** Which preload each module holds, so that a closed database's module serves the next one with the same. */
const preloadKeys = new WeakMap<PostgresModule, string>()

/** Installs `preload` into a module that ran nothing yet, and notes which one it holds. */
async function preloadContrib(mod: PostgresModule, preload: ModulePreload): Promise<void> {
  await preload.install(mod)
  preloadKeys.set(mod, preload.key)
}

/** Per preload key, modules with it installed: closed databases' ones, and one made ahead. */
const preloadedPools = new Map<string, ModulePool>()

function preloadedPoolFor(preload: ModulePreload, env: Record<string, string>): ModulePool {
  let preloaded = preloadedPools.get(preload.key)
  if (!preloaded) preloadedPools.set(preload.key, (preloaded = new ModulePool((assets, bytes) => makePreloaded(assets, preload, env, bytes))))
  return preloaded
}

async function makePreloaded(assets: EngineAssets, preload: ModulePreload, env: Record<string, string>, bytes: number): Promise<BlankModule> {
  const blank = await BlankModule.create(assets, env, bytes)
  try {
    await preloadContrib(blank.mod, preload)
    notePrepared(blank.control)
  } catch (err) {
    blank.discard()
    throw err
  }
  return blank
}

/** For tests: forget this process's snapshots and pooled modules. */
export function clearSnapshotMemory(): void {
  snapshots.clear()
  contribSnapshots.clear()
  contribStates.clear()
  forgetContribReads()
  for (const preloaded of preloadedPools.values()) preloaded.clear()
  preloadedPools.clear()
  diskReads.clear()
  pool.clear()
}
