import type { PostgresModule } from '../emscripten.js'

/**
 * `PGPROC.xid` on wasm32 in PostgreSQL 18: after `links` (two pointers),
 * `procgloballist`, `sem`, `waitStatus` (4 bytes each) and `procLatch` (16).
 */
const PGPROC_XID = 36
/** `MemoryContextData` on wasm32 (memnodes.h): its first child, next sibling, name and identifier. */
const CONTEXT_FIRST_CHILD = 20
const CONTEXT_NEXT_CHILD = 28
const CONTEXT_NAME = 32
const CONTEXT_IDENT = 36

/** The engine's transaction block as it stands between requests (see {@link readTransactionBlock}). */
export interface TransactionBlock {
  /** `transaction_isolation` as Postgres shows it: `read committed`, `repeatable read`... */
  readonly isolation: string
  readonly readOnly: boolean
  readonly deferrable: boolean
  /** The block has a transaction id: it wrote, or locked rows. */
  readonly hasXid: boolean
  /** Savepoints open in it. */
  readonly savepoints: number
  /**
   * Named portals that end with it: cursors (SQL's, or a function's, as a
   * returned refcursor), and portals bound by name. `WITH HOLD` cursors of
   * earlier blocks are not counted; the unnamed portal is not either.
   */
  readonly cursors: number
}

type Fn = (...args: number[]) => number

/**
 * Reads the open block's state from the engine's memory and its exported
 * functions, running no statement: a server asks this between a client's
 * statements, where a query of its own would cost as much as theirs.
 */
export function readTransactionBlock(mod: PostgresModule, exports: WebAssembly.Exports): TransactionBlock {
  const view = new DataView(mod.HEAPU8.buffer)
  const proc = view.getUint32((exports.MyProc as WebAssembly.Global).value as number, true)
  const getConfigOption = exports.GetConfigOption as Fn
  const setting = (name: string): string => {
    const sp = mod.stackSave()
    try {
      // missing_ok, and no privilege check: these are every role's to read.
      const value = getConfigOption(mod.stringToUTF8OnStack(name), 1, 0)
      return value === 0 ? '' : mod.UTF8ToString(value)
    } finally {
      mod.stackRestore(sp)
    }
  }
  return {
    isolation: setting('transaction_isolation'),
    readOnly: setting('transaction_read_only') === 'on',
    deferrable: setting('transaction_deferrable') === 'on',
    hasXid: proc !== 0 && view.getUint32(proc + PGPROC_XID, true) !== 0,
    savepoints: Math.max(0, (exports.GetCurrentTransactionNestLevel as Fn)() - 1),
    cursors: countCursors(view, view.getUint32((exports.TopMemoryContext as WebAssembly.Global).value as number, true)),
  }
}

/**
 * Each portal has a memory context under `TopPortalContext` named
 * `PortalContext`, identified by the portal's name (`<unnamed>` for the
 * unnamed one), and a held cursor one more, `PortalHoldContext`: the
 * portal table itself is not reachable from outside the engine.
 */
function countCursors(view: DataView, top: number): number {
  let portals = 0
  for (let child = firstChild(view, top); child !== 0; child = nextChild(view, child)) {
    if (!named(view, child, CONTEXT_NAME, 'TopPortalContext')) continue
    for (let portal = firstChild(view, child); portal !== 0; portal = nextChild(view, portal)) {
      if (named(view, portal, CONTEXT_NAME, 'PortalHoldContext')) portals--
      else if (named(view, portal, CONTEXT_NAME, 'PortalContext') && !named(view, portal, CONTEXT_IDENT, '<unnamed>')) portals++
    }
    break
  }
  return Math.max(0, portals)
}

function firstChild(view: DataView, context: number): number {
  return view.getUint32(context + CONTEXT_FIRST_CHILD, true)
}

function nextChild(view: DataView, context: number): number {
  return view.getUint32(context + CONTEXT_NEXT_CHILD, true)
}

/** Whether the C string the field at `offset` of `context` points to is `text` (ASCII). */
function named(view: DataView, context: number, offset: number, text: string): boolean {
  const at = view.getUint32(context + offset, true)
  if (at === 0) return false
  for (let i = 0; i < text.length; i++) if (view.getUint8(at + i) !== text.charCodeAt(i)) return false
  return view.getUint8(at + text.length) === 0
}
