/**
 * Live queries for `@pgwasm/pglite`, shaped as PGlite's `live` extension:
 * `db.live.query()`, `incrementalQuery()` and `changes()` re-run after every
 * committed write to a table they read, whichever API (or socket client)
 * wrote.
 *
 * @example
 * ```ts
 * import { PGlite } from '@pgwasm/pglite'
 * import { live } from '@pgwasm/pglite/live'
 *
 * const db = await PGlite.create({ extensions: { live } })
 * const { unsubscribe } = await db.live.query('select * from todo order by id', [], (res) => render(res.rows))
 * ```
 *
 * @packageDocumentation
 */
import { createLive } from './namespace.js'
import type { LiveDb, LiveNamespace } from './types.js'

export { createLive } from './namespace.js'
export { LiveEndedError } from './subscription.js'
export { LIVE_CHANNEL, LIVE_FUNCTION, LIVE_TRIGGER } from './triggers.js'
export type {
  Change,
  ChangeDelete,
  ChangeInsert,
  ChangeReset,
  ChangeUpdate,
  LiveChanges,
  LiveChangesOptions,
  LiveDb,
  LiveHandle,
  LiveIncrementalQueryOptions,
  LiveNamespace,
  LiveOptions,
  LiveParams,
  LiveQuery,
  LiveQueryOptions,
  LiveQueryResults,
  PGliteWithLive,
  Row,
} from './types.js'
export type { PGliteExtension } from '../options.js'

/**
 * The live extension: `PGlite.create({ extensions: { live } })` gives
 * `db.live`, and `db.close()` ends its queries and drops their triggers
 * first. `PGliteWorker.create(worker, { extensions: { live } })` gives the
 * same on the page, for a database in a worker or shared by several tabs. Without the option, `(await live.setup(db)).namespaceObj` or
 * {@link createLive} do the same for an open database.
 */
export const live: {
  readonly name: string
  setup(db: LiveDb): Promise<{ namespaceObj: LiveNamespace; close: () => Promise<void> }>
} = {
  name: 'live',
  async setup(db: LiveDb) {
    const handle = createLive(db)
    return { namespaceObj: handle, close: () => handle.close() }
  },
}
