/**
 * `@pgwasm/pglite/worker`: run the database in a Web Worker or a Node
 * `worker_threads` worker and use it from the page (or main thread) through
 * the same async API, shaped like `@electric-sql/pglite/worker`.
 *
 * In the worker:
 * ```ts
 * import { PGlite } from '@pgwasm/pglite'
 * import { worker } from '@pgwasm/pglite/worker'
 * worker({ init: (options) => PGlite.create(options) })
 * ```
 * On the page:
 * ```ts
 * import { PGliteWorker } from '@pgwasm/pglite/worker'
 * const pg = await PGliteWorker.create(new Worker(new URL('./pg-worker.js', import.meta.url), { type: 'module' }))
 * ```
 * Errors keep their class and fields (`DatabaseError` with its SQLSTATE
 * `code`, `constraint`, ...); import the classes from `@pgwasm/pglite`.
 */
export { PGliteWorker } from './worker/client.js'
export { worker } from './worker/host.js'
export type { WorkerOptions } from './worker/host.js'
export type { PGliteWorkerOptions, PGliteWorkerInitOptions, PGliteWorkerExtension, WorkerExtensionNamespaces } from './worker/options.js'
export type { PGliteWorkerInterface } from './worker/interface.js'
export type { WorkerLike, WebWorkerLike, NodeWorkerLike } from './worker/port.js'
