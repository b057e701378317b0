import type { PGliteExtensionSetup, PGliteOptions } from '../options.js'
import type { PGliteWorkerInterface } from './interface.js'
import { signalOfFlag } from '../query/abort.js'
import type { Notice, QueryOptions } from '../query/results.js'

/**
 * What the page's options become in the worker: the argument of `init`.
 * Only structured-cloneable options cross, so `parsers` and `serializers`
 * are set up inside `init` instead, and engine add-ons (contrib modules,
 * pgvector) too; page add-ons (`live`) stay on the page.
 */
export interface PGliteWorkerInitOptions
  extends Omit<PGliteOptions, 'parsers' | 'serializers' | 'extensions' | 'loadDataTree' | 'cloneOf'> {
  /** Anything structured-cloneable the page wants `init` to see. */
  meta?: unknown
  /** Accepted for `@electric-sql/pglite` compatibility; passed to `init` as is. */
  id?: string
}

/**
 * An add-on that runs on the page, over the worker's database, as
 * `@electric-sql/pglite/worker` runs one (`setup(pg, {}, true)`): `live`
 * from `@pgwasm/pglite/live`. Add-ons that bring an engine bundle (contrib
 * modules, pgvector) load in the worker's `init` instead.
 */
export interface PGliteWorkerExtension {
  name: string
  setup(db: PGliteWorkerInterface, emscriptenOpts?: Record<string, unknown>, clientOnly?: boolean): Promise<PGliteExtensionSetup>
}

/** What `PGliteWorker.create(worker, { extensions })` adds to the page's instance: `pg[key]` per add-on. */
export type WorkerExtensionNamespaces<E> =
  E extends Record<string, PGliteWorkerExtension>
    ? string extends keyof E
      ? unknown
      : { readonly [K in keyof E]: E[K] extends { setup(...args: never[]): Promise<{ namespaceObj?: infer N }> } ? N : never }
    : unknown

/** Options of `new PGliteWorker(worker, options)`: the `init` options plus how the page treats the worker. */
export interface PGliteWorkerOptions extends PGliteWorkerInitOptions {
  /**
   * Add-ons set up on the page once the worker's database is ready, each
   * becoming `pg[key]`: `{ live }` gives `pg.live`, whose queries follow
   * writes from every tab sharing the database.
   */
  extensions?: Record<string, PGliteWorkerExtension>
  /**
   * Whether `close()` also terminates the worker (after the database closed
   * cleanly), as `@electric-sql/pglite`'s `PGliteWorker` always does. Off by
   * default: the worker belongs to the caller, and in Node a worker whose
   * database closed exits by itself once nothing else keeps it alive.
   * @default false
   */
  terminateOnClose?: boolean
}

/** Query options as they cross to the worker: the functions left out. */
export interface WireQueryOptions {
  rowMode?: QueryOptions['rowMode']
  paramTypes?: number[]
  blob?: Blob
  /** The page has an `onNotice`: the worker sends the notices back with the reply. */
  wantsNotices?: boolean
  /**
   * The page's `signal`, as one word of shared memory the page sets when it
   * aborts: the worker reads it where its engine polls, while the statement
   * runs (query/abort.ts). Only where shared memory exists (Node, a
   * cross-origin isolated page).
   */
  abortFlag?: Int32Array
}

const FUNCTION_OPTIONS = ['parsers', 'serializers'] as const

/**
 * The part of the page's options that goes to `init`.
 * @throws {TypeError} for an option that holds functions.
 */
export function toInitOptions(options: PGliteWorkerOptions): PGliteWorkerInitOptions {
  for (const name of FUNCTION_OPTIONS) {
    if ((options as Record<string, unknown>)[name] !== undefined) {
      throw new TypeError(`\`${name}\` cannot be sent to a worker (functions do not survive structured clone); set it up in the worker's \`init\``)
    }
  }
  const { terminateOnClose: _pageOnly, extensions: _onThePage, ...initOptions } = options
  return initOptions
}

/**
 * The cloneable part of per-query options; `undefined` when there is none,
 * so the common call sends nothing extra.
 * @throws {TypeError} for `parsers` or `serializers`, which are functions.
 */
export function toWireQueryOptions(options: QueryOptions | undefined, method: string): WireQueryOptions | undefined {
  if (!options) return undefined
  if (options.parsers !== undefined || options.serializers !== undefined) {
    const name = options.parsers !== undefined ? 'parsers' : 'serializers'
    throw new TypeError(
      `\`${method}\` option \`${name}\` cannot be sent to a worker (functions do not survive structured clone); set \`${name}\` on the PGlite instance the worker's \`init\` returns`,
    )
  }
  const { rowMode, paramTypes, blob, onNotice, signal } = options
  if (rowMode === undefined && paramTypes === undefined && blob === undefined && onNotice === undefined && signal === undefined) return undefined
  const wire: WireQueryOptions = {}
  if (signal !== undefined && sharedMemory()) {
    const flag = new Int32Array(new SharedArrayBuffer(4))
    if (signal.aborted) Atomics.store(flag, 0, 1)
    else signal.addEventListener('abort', () => Atomics.store(flag, 0, 1), { once: true })
    wire.abortFlag = flag
  }
  if (rowMode !== undefined) wire.rowMode = rowMode
  if (paramTypes !== undefined) wire.paramTypes = paramTypes
  if (blob !== undefined) wire.blob = blob
  if (onNotice !== undefined) wire.wantsNotices = true
  return wire
}

/**
 * Query options again, in the worker. `notices`, when given, collects what
 * `onNotice` would have received on the page.
 */
export function fromWireQueryOptions(wire: WireQueryOptions, notices: Notice[] | undefined): QueryOptions {
  const options: QueryOptions = {}
  if (wire.rowMode !== undefined) options.rowMode = wire.rowMode
  if (wire.paramTypes !== undefined) options.paramTypes = wire.paramTypes
  if (wire.blob !== undefined) options.blob = wire.blob
  if (notices) options.onNotice = (notice) => notices.push(notice)
  if (wire.abortFlag !== undefined) options.signal = signalOfFlag(wire.abortFlag)
  return options
}

/** Whether this thread can share memory with a worker: always in Node, on cross-origin isolated pages in browsers. */
function sharedMemory(): boolean {
  const scope = globalThis as { crossOriginIsolated?: boolean; process?: { versions?: { node?: string } } }
  return typeof SharedArrayBuffer === 'function' && (scope.crossOriginIsolated === true || scope.process?.versions?.node !== undefined)
}
