/**
 * How a new instance gets its engine: the storage its `dataDir` names
 * (memory, a directory, IndexedDB), and the start path (a clone, a saved
 * state, a snapshot, the template, a loaded dump, or Postgres booting).
 */
import { loadAssets, locateEngine, prefetchBundledTemplate } from '../engine/loading/assets.js'
import { Backend } from '../engine/backend/backend.js'
import type { DataDirMount } from '../engine/backend/backend-types.js'
import type { PostgresModule } from '../engine/emscripten.js'
import { EngineError } from '../engine/engine-error.js'
import { treeRelationBytes, type DataTree } from '../engine/files/pgdata-tree.js'
import type { EngineSnapshot } from '../engine/start/snapshot.js'
import type { ContribStart } from '../engine/start/contrib-disk.js'
import {
  prefetchContrib,
  prefetchSavedState,
  prefetchSnapshot,
  restoreContribState,
  restoreCopy,
  restoreSavedState,
  saveContribState,
  saveState,
  startInMemory,
  startWithContrib,
  type MemoryStartOptions,
  type ModulePreload,
  type SnapshotKeyParts,
} from '../engine/start/starter.js'
import { getMemoryTemplate, getTemplate, knownArrayTypes, memoryTemplateKey, rememberArrayTypes, type ArrayTypeRow, type TemplateOptions } from '../engine/start/template.js'
import type { ContribExtension } from '../extensions/contrib-types.js'
import { contribPreload, warmContrib, withPreloadLibraries } from '../extensions/contrib.js'
import { contribDigest } from '../extensions/contrib-digest.js'
import { parseDataDir, type DirClaim } from '../fs/data-dir.js'
import { readDataDirArchive, type DataDirArchive } from '../fs/dump.js'
import type { JournaledStore } from '../fs/journaled-store.js'
import { parseArrayTypes } from './array-types.js'

/** The options the start path reads; a `PGliteOptions` is one (the option types are not named here: they name the PGlite class). */
export interface OpenOptions {
  readonly dataDir?: string
  readonly username?: string
  readonly database?: string
  readonly initialMemory?: number
  readonly initdbArgs?: string[]
  readonly templateCacheDir?: string | false
  readonly relaxedDurability?: boolean
  readonly assetBaseUrl?: string
  readonly loadDataDir?: DataDirArchive
  readonly loadDataTree?: DataTree
  readonly savedState?: string
  readonly cloneOf?: Backend
}

/** What the start path needs of the instance beside its options. */
export interface OpenRequest {
  readonly options: OpenOptions
  /** The contrib modules among the `extensions`. */
  readonly contrib: readonly ContribExtension[]
  /** Sets up the add-ons while the engine loads; returns the bundles they name, to install as contrib modules. */
  setUpAddOns(): Promise<readonly ContribExtension[]>
  /** Postgres' arguments for a database in memory, in a directory (sized by its relation files) or in IndexedDB. */
  startArgs(storage: 'memory' | 'directory' | 'journaled', relationBytes?: number): string[]
  /** Claims a directory for the instance in this process (fs/data-dir.ts). */
  claimDir(path: string): Promise<DirClaim>
  readonly onLog: ((line: string) => void) | undefined
}

/** An `idb://` database's writer to IndexedDB; a new engine after a death gets a new one. */
export interface StoreWriter {
  current: JournaledStore | undefined
}

/** A started engine and what the instance keeps of how it started. */
export interface OpenedInstance {
  readonly backend: Backend
  /** Lets go of the storage (the directory's lock, the IndexedDB store). */
  readonly releaseDir: (() => Promise<void>) | undefined
  readonly store: StoreWriter | undefined
  /** Starts the engine again on what the database stores: its directory, or its idb:// store. */
  readonly restart: (() => Promise<Backend>) | undefined
  /** A directory database (Node): its close leaves a note for the next open. */
  readonly onDisk: boolean
  /** Started from a saved state (see `createCached`). */
  readonly restoredState: boolean
  /** Saves the state `createCached`'s setup left under `key`; undefined where none can be saved. */
  readonly saveState: ((key: string, backend: Backend, note: string) => Promise<void>) | undefined
  /** A copy of another session (a clone or a saved state): its prepared statements are not this instance's. */
  readonly copied: boolean
  /** The catalog's array types where they are known without asking it. */
  readonly knownArrayTypes: readonly ArrayTypeRow[] | undefined
  /** Keeps the array types the instance read, for the next instance that starts the same way. */
  learnArrayTypes(rows: readonly ArrayTypeRow[]): void
}

/**
 * The catalog's array types as the first copy of a snapshot read them: a
 * later copy of the same snapshot (clones of an unchanged source) has the
 * same catalog, and need not ask again.
 */
const cloneArrayTypes = new WeakMap<EngineSnapshot, readonly ArrayTypeRow[]>()

export async function openInstance(request: OpenRequest): Promise<OpenedInstance> {
  const { options: opts, onLog } = request
  const spec = parseDataDir(opts.dataDir)
  const templateOptions = { initdbArgs: opts.initdbArgs, cacheDir: opts.templateCacheDir }
  const username = opts.username ?? 'postgres'
  const database = opts.database ?? 'postgres'
  const assetsLoading = loadAssets({ assetBaseUrl: opts.assetBaseUrl })
  // Contrib side modules are instantiated before Postgres starts: such a
  // backend can neither come from nor leave a start-up snapshot.
  // As PGlite does: add-ons are set up before the engine starts, and one
  // that names a bundle (pgvector's package) is installed as a contrib module.
  const bundles = await request.setUpAddOns()
  const contrib = [...request.contrib, ...bundles]
  const preload = contribPreload(contrib)
  const bootOnly = contrib.length > 0 || opts.loadDataDir !== undefined
  // The bundles' files and side modules as installed, from the disk cache, while the engine compiles.
  if (contrib.length > 0 && opts.assetBaseUrl === undefined) warmContrib(contrib, opts.templateCacheDir, assetsLoading)
  // A new database in memory with contrib modules: its start (or saved state) is a snapshot too, from this process or the disk cache.
  const contribFromSnapshot =
    contrib.length > 0 && spec.kind === 'memory' && opts.initialMemory === undefined && !opts.loadDataTree && !opts.cloneOf && opts.loadDataDir === undefined
  const contribStart = contribFromSnapshot ? startOfContrib(request, contrib, templateOptions).catch((): ContribStart => ({})) : undefined
  if (
    spec.kind === 'memory' &&
    opts.assetBaseUrl === undefined &&
    !opts.loadDataTree &&
    !opts.cloneOf &&
    opts.initialMemory === undefined &&
    !bootOnly
  ) {
    // Read a cached snapshot (or the saved state asked for) while the engine compiles.
    const { engineVersion } = await locateEngine()
    const keyParts = {
      treeKey: memoryTemplateKey({ engineVersion }, templateOptions),
      username,
      database,
      startArgs: request.startArgs('memory'),
      cacheDir: opts.templateCacheDir,
    }
    if (opts.savedState !== undefined) void prefetchSavedState(keyParts, opts.savedState)
    else {
      void prefetchSnapshot(keyParts).then((snapshot) => {
        // No snapshot: Postgres boots from the template, so unpack it meanwhile.
        if (!snapshot && !opts.initdbArgs?.length) prefetchBundledTemplate({ assetBaseUrl: opts.assetBaseUrl })
      })
    }
  }
  const archiveReading = opts.loadDataDir === undefined ? undefined : readDataDirArchive(opts.loadDataDir)
  // An idb:// database is read from IndexedDB while the engine compiles.
  const idbOpening =
    spec.kind === 'journaled'
      ? import('../fs/journaled-store.js').then(({ JournaledStore }) =>
          JournaledStore.open(spec.name, {
            scheme: spec.scheme,
            relaxed: opts.relaxedDurability === true,
            engineVersion: assetsLoading.then((a) => a.engineVersion),
            create: async () => {
              const [a, archive] = await Promise.all([assetsLoading, archiveReading])
              return opts.loadDataTree ?? archive ?? (await getTemplate(a, templateOptions))
            },
          }),
        )
      : undefined
  idbOpening?.catch(() => {})
  // A directory is claimed, locked and measured while the engine compiles (~50 ms of a new process's reopen).
  const dirPreparing =
    spec.kind === 'node'
      ? prepareDirectory(spec.path, request, async () => opts.loadDataTree ?? (await archiveReading), async () => getTemplate(await assetsLoading, templateOptions))
      : undefined
  dirPreparing?.catch(() => {})
  let assets: Awaited<typeof assetsLoading>
  let loadedTree: Awaited<typeof archiveReading>
  try {
    ;[assets, loadedTree] = await Promise.all([assetsLoading, archiveReading])
  } catch (err) {
    // The store may open anyway: let go of it and its lock; so may the directory.
    await idbOpening?.then((o) => o.persistence.close()).catch(() => {})
    await dirPreparing?.then((d) => d.releaseDir()).catch(() => {})
    throw err
  }
  const loadTree = opts.loadDataTree ?? loadedTree
  let mount: DataDirMount
  let relationBytes: number | undefined
  let createdInStore = false
  let store: StoreWriter | undefined
  let releaseDir: (() => Promise<void>) | undefined
  /** An idb:// database read again from IndexedDB, for a new engine after one died. */
  let reopenStore: (() => Promise<DataTree>) | undefined
  if (spec.kind === 'journaled') {
    const opened = await idbOpening!
    createdInStore = opened.created
    if (loadTree && !opened.created) {
      await opened.persistence.close()
      throw new EngineError(`loadDataDir: idb://${spec.name} already holds a database; load into a new name`, { code: 'BAD_DATA_DIR' })
    }
    const writer: StoreWriter = { current: opened.persistence }
    store = writer
    releaseDir = async () => {
      const persistence = writer.current
      writer.current = undefined
      await persistence?.close()
    }
    reopenStore = async () => {
      const dead = writer.current
      writer.current = undefined
      await dead?.discard()
      const { JournaledStore } = await import('../fs/journaled-store.js')
      const again = await JournaledStore.open(spec.name, {
        scheme: spec.scheme,
        relaxed: opts.relaxedDurability === true,
        engineVersion: assetsLoading.then((a) => a.engineVersion),
        create: () => Promise.reject(new EngineError(`${spec.scheme}://${spec.name} is no longer stored`, { code: 'BAD_DATA_DIR' })),
      })
      writer.current = again.persistence
      return again.tree
    }
    mount = { kind: 'memory', tree: opened.tree }
  } else if (opts.cloneOf) {
    mount = { kind: 'memory', tree: [] }
  } else if (loadTree && spec.kind === 'memory') {
    mount = { kind: 'memory', tree: loadTree }
  } else if (spec.kind === 'memory') {
    // Loaded only if Postgres must boot: a snapshot restore needs no template.
    mount = { kind: 'memory', tree: bootOnly && !contribFromSnapshot ? await getMemoryTemplate(assets, templateOptions) : [] }
  } else {
    const prepared = await dirPreparing!
    relationBytes = prepared.relationBytes
    releaseDir = prepared.releaseDir
    mount = { kind: 'node', path: prepared.path }
  }
  let backend: Backend
  let savedArrayTypes: readonly ArrayTypeRow[] | undefined
  let cloneSource: EngineSnapshot | undefined
  let restart: (() => Promise<Backend>) | undefined
  let onDisk = false
  /** What a saved state of this in-memory database is keyed by; undefined where none can be saved. */
  let stateKeyParts: SnapshotKeyParts | undefined
  let restoredState = false
  /** How `createCached` keeps the state of a database with contrib modules (see `saveContribState`). */
  let contribState: ContribState | undefined
  try {
    if (opts.cloneOf) {
      backend = await restoreCopy(assets, opts.cloneOf, onLog, preload)
      // Inside the source's turn: the snapshot the copy came from, kept until the source runs again.
      cloneSource = opts.cloneOf.snapshot()
      savedArrayTypes = cloneArrayTypes.get(cloneSource)
    } else {
      const backendOptions = {
        mount,
        username,
        database,
        startArgs: withPreloadLibraries(
          request.startArgs(spec.kind === 'journaled' ? 'journaled' : mount.kind === 'memory' ? 'memory' : 'directory', relationBytes),
          contrib,
        ),
        initialMemory: opts.initialMemory,
        onLog,
        prepare: contrib.length > 0 ? (mod: PostgresModule) => preload.install(mod) : undefined,
        afterMount: store ? (mod: PostgresModule) => store?.current?.attach(mod) : undefined,
      }
      // A database made from the template in memory: its start can be a snapshot's.
      const fromTemplate = mount.kind === 'memory' && !loadTree && spec.kind === 'memory'
      const memoryStart = {
        ...backendOptions,
        treeKey: memoryTemplateKey(assets, templateOptions),
        loadTree: () => getMemoryTemplate(assets, templateOptions),
        cacheDir: opts.templateCacheDir,
      }
      if (fromTemplate && !bootOnly) {
        if (opts.initialMemory === undefined) stateKeyParts = memoryStart
        const saved = opts.savedState !== undefined && stateKeyParts ? await restoreSavedState(assets, memoryStart, opts.savedState, onLog) : undefined
        restoredState = saved !== undefined
        savedArrayTypes = saved && parseArrayTypes(saved.note)
        backend = saved?.backend ?? (await startInMemory(assets, memoryStart))
      } else if (fromTemplate && contribStart) {
        // Contrib side modules preloaded the same way each time: a later
        // instance restores the first one's start, or (createCached) the
        // state its setup left.
        const start = await contribStart
        const saved = opts.savedState === undefined ? undefined : await restoreContribState(assets, memoryStart, preload, opts.savedState, start)
        if (opts.savedState !== undefined) contribState = { options: memoryStart, preload, start }
        restoredState = saved !== undefined
        savedArrayTypes = saved && parseArrayTypes(saved.note)
        // A setup about to run (createCached) gets a module that served no other database: its state can then be kept on disk.
        backend = saved?.backend ?? (await startWithContrib(assets, memoryStart, preload, { ...start, newModule: opts.savedState !== undefined }))
      } else {
        backend = await Backend.start(assets, backendOptions)
        if (mount.kind === 'node') {
          onDisk = true
          // What the last close noted, if nothing started the directory since (clean-shutdown.ts).
          savedArrayTypes = parseArrayTypes(backend.cleanStartNote)
          // Postgres' own answer to a crashed backend: start again on what is stored.
          restart = () => Backend.start(assets, backendOptions)
        } else if (reopenStore) {
          const reopen = reopenStore
          restart = async () => Backend.start(assets, { ...backendOptions, mount: { kind: 'memory', tree: await reopen() } })
        }
      }
    }
  } catch (err) {
    await releaseDir?.()
    throw err
  }
  // A database nothing ran in yet has the template's catalog: its array types may be known.
  const fresh = !bootOnly && !loadTree && !opts.cloneOf && !restoredState && (spec.kind === 'memory' || (spec.kind === 'journaled' && createdInStore))
  const known = fresh ? knownArrayTypes(assets, templateOptions) : savedArrayTypes
  return {
    backend,
    releaseDir,
    store,
    restart,
    onDisk,
    restoredState,
    saveState: saveStateOf(stateKeyParts, contribState),
    copied: opts.cloneOf !== undefined || restoredState,
    knownArrayTypes: known,
    learnArrayTypes: (rows) => {
      if (fresh && !known) rememberArrayTypes(assets, templateOptions, rows)
      if (cloneSource && !known) cloneArrayTypes.set(cloneSource, rows)
    },
  }
}

/** What `createCached` needs to keep the state of a database with contrib modules. */
interface ContribState {
  readonly options: MemoryStartOptions
  readonly preload: ModulePreload
  readonly start: ContribStart
}

/**
 * The digest of the bundles (the disk cache's key, ~2 ms of reading and
 * hashing), and the disk read it names started, while the engine compiles.
 */
async function startOfContrib(request: OpenRequest, contrib: readonly ContribExtension[], templateOptions: TemplateOptions): Promise<ContribStart> {
  const opts = request.options
  // No disk cache (or none in a browser): kept in the process only.
  if (opts.templateCacheDir === false || opts.assetBaseUrl !== undefined) return {}
  const [bundlesDigest, { engineVersion }] = await Promise.all([contribDigest(contrib), locateEngine()])
  if (bundlesDigest === undefined) return {}
  const keyParts = {
    treeKey: memoryTemplateKey({ engineVersion }, templateOptions),
    username: opts.username ?? 'postgres',
    database: opts.database ?? 'postgres',
    startArgs: withPreloadLibraries(request.startArgs('memory'), contrib),
    cacheDir: opts.templateCacheDir,
  }
  prefetchContrib(keyParts, { bundlesDigest }, opts.savedState)
  return { bundlesDigest }
}

function saveStateOf(keyParts: SnapshotKeyParts | undefined, contribState: ContribState | undefined): OpenedInstance['saveState'] {
  if (contribState) return (key, backend, note) => saveContribState(contribState.options, contribState.preload, key, backend, note, contribState.start)
  if (keyParts) return (key, backend, note) => saveState(keyParts, key, backend, note)
  return undefined
}

/** A directory claimed by this instance, locked, and made from the template (or the loaded dump) if it was empty. */
interface PreparedDirectory {
  /** The canonical path, whichever symlink reached it. */
  readonly path: string
  /** The size of its relation files, which sizes the buffer pool. */
  readonly relationBytes: number | undefined
  readonly releaseDir: () => Promise<void>
}

/**
 * Claims and locks the directory `dataDir` names, and fills it if it is
 * empty: with `loadTree`'s dump when one is given (an error if the directory
 * holds a database already), else with `template`.
 */
async function prepareDirectory(
  dataDir: string,
  request: OpenRequest,
  loadTree: () => Promise<DataTree | undefined>,
  template: () => Promise<DataTree>,
): Promise<PreparedDirectory> {
  const { canonicalDir, prepareNodeDataDir, relationBytes: measure } = await import('../fs/node-dir.js')
  // A directory's size sizes its buffer pool: measured while it is claimed and locked.
  const dirSizing = measure(dataDir)
  dirSizing.catch(() => {})
  // One key and one mount per directory, whichever symlink reached it.
  const path = await canonicalDir(dataDir)
  const claim = await request.claimDir(path)
  try {
    const tree = await loadTree()
    const { created, unlock } = await prepareNodeDataDir(path, tree ? async () => tree : template)
    if (tree && !created) {
      await unlock()
      throw new EngineError(`loadDataDir: the data directory ${path} already holds a database; load into an empty directory`, {
        code: 'BAD_DATA_DIR',
      })
    }
    // A directory just made holds what the early measure missed: the template's few MB, or a loaded dump.
    const relationBytes = created ? treeRelationBytes(tree ?? []) : await dirSizing.catch(() => undefined)
    claim.setUnlock(unlock)
    return {
      path,
      relationBytes,
      releaseDir: async () => {
        claim.release()
        await unlock()
      },
    }
  } catch (err) {
    claim.release()
    throw err
  }
}
