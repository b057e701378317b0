import { EngineError } from '../engine-error.js'
import type { PostgresModule } from '../emscripten.js'
import type { GuardRecords, SessionGuards } from './session-guards.js'
import { UtilityHook, type StatementNames, type UtilityCheck } from './utility-hook.js'
import { reportActivity, type ActivityRow } from './activity-report.js'
import { holdsCString, pointersTo, readStaticData } from '../loading/static-data.js'

/*
 * Built-in SQL functions whose answer depends on which client of the one
 * backend session asks: pg_backend_pid(), pg_terminate_backend(),
 * pg_cancel_backend() and the advisory locks. A socket
 * server runs many clients on that session, so as Postgres has them these
 * functions would answer for all of them at once (one pid; locks that every
 * client re-enters and none releases at disconnect). Their entries in the
 * engine's table of built-in functions (`fmgr_builtins`: oid, nargs, strict,
 * retset, name, function; 16 bytes on wasm32) are pointed at JavaScript that
 * answers per client. The session-level advisory locks are kept here, by
 * client; the transaction-level ones stay Postgres' own (a client inside a
 * transaction holds the engine until it ends, so no other client can meet
 * them) once they are checked against other clients' session locks.
 */

/** `FmgrBuiltin`: the name pointer and the function's table index. */
const BUILTIN_NAME = 8
const BUILTIN_FUNC = 12
/** `FunctionCallInfoBaseData` on wasm32: flinfo, context, resultinfo, fncollation, isnull, nargs, then 8-byte NullableDatums. */
const FCINFO_ARGS = 20
const NULLABLE_DATUM = 8
const WARNING = 19

type Mode = 'exclusive' | 'shared'
type Op =
  | { kind: 'pid' }
  | { kind: 'terminate' }
  | { kind: 'cancel' }
  | { kind: 'lock'; mode: Mode; wait: boolean; int4: boolean }
  | { kind: 'unlock'; mode: Mode; int4: boolean }
  | { kind: 'unlock-all' }
  | { kind: 'xact'; mode: Mode; wait: boolean; int4: boolean }
  | { kind: 'setting' }
  | { kind: 'activity' }
  | { kind: 'block-bound' }

function advisory(prefix: string, make: (mode: Mode, int4: boolean) => Op): [string, Op][] {
  return (['exclusive', 'shared'] as const).flatMap((mode) =>
    [false, true].map((int4): [string, Op] => [`${prefix}${mode === 'shared' ? '_shared' : ''}_${int4 ? 'int4' : 'int8'}`, make(mode, int4)]),
  )
}

/** The functions replaced, by their C name (`pg_proc.prosrc`). */
const OVERRIDDEN = new Map<string, Op>([
  ['pg_backend_pid', { kind: 'pid' }],
  ['pg_terminate_backend', { kind: 'terminate' }],
  ['pg_cancel_backend', { kind: 'cancel' }],
  // set_config(): reported to the client's utility check as the SET it is, wherever SQL calls it.
  ['set_config_by_name', { kind: 'setting' }],
  // pg_stat_activity: a server's clients, as the backends of a server (activity-report.ts).
  ['pg_stat_get_activity', { kind: 'activity' }],
  ...advisory('pg_advisory_lock', (mode, int4) => ({ kind: 'lock', mode, wait: true, int4 })),
  ...advisory('pg_try_advisory_lock', (mode, int4) => ({ kind: 'lock', mode, wait: false, int4 })),
  ...advisory('pg_advisory_unlock', (mode, int4) => ({ kind: 'unlock', mode, int4 })),
  ['pg_advisory_unlock_all', { kind: 'unlock-all' }],
  ...advisory('pg_advisory_xact_lock', (mode, int4) => ({ kind: 'xact', mode, wait: true, int4 })),
  ...advisory('pg_try_advisory_xact_lock', (mode, int4) => ({ kind: 'xact', mode, wait: false, int4 })),
  // What lasts until the transaction ends and no state read between requests shows: counted (blockBoundCalls).
  ['pg_notify', { kind: 'block-bound' }],
  ['be_lo_open', { kind: 'block-bound' }],
  ['pg_export_snapshot', { kind: 'block-bound' }],
])

/** Addresses of the replaced functions' `fmgr_builtins` entries, found once per compiled engine. */
const builtinsByEngine = new WeakMap<WebAssembly.Module, Map<string, number>>()
/** Prefix of these entries among the shipped record addresses (see `GuardRecords`). */
const KEY_PREFIX = 'fmgr:'

/** The entry addresses found for `engine` in this process, keyed for the shipped record list (scripts/make-template.ts). */
export function builtinRecordsOf(engine: WebAssembly.Module): GuardRecords | undefined {
  const found = builtinsByEngine.get(engine)
  return found && Object.fromEntries([...found].map(([name, at]) => [`${KEY_PREFIX}${name}`, at]))
}

function checkKnown(heap: Uint8Array, heapBase: number, known: GuardRecords): Map<string, number> | undefined {
  const view = new DataView(heap.buffer, heap.byteOffset, heapBase)
  const found = new Map<string, number>()
  for (const name of OVERRIDDEN.keys()) {
    const at = known[`${KEY_PREFIX}${name}`]
    if (at === undefined || at <= 0 || at % 4 !== 0 || at + 16 > heapBase) return undefined
    if (!holdsCString(heap, view.getUint32(at + BUILTIN_NAME, true), name)) return undefined
    found.set(name, at)
  }
  return found
}

function locate(heap: Uint8Array, heapBase: number): Map<string, number> {
  const data = readStaticData(heap, heapBase)
  const found = new Map<string, number>()
  for (const name of OVERRIDDEN.keys()) {
    // An entry's name pointer follows its oid and flags; it has an oid and a function.
    const entries = pointersTo(data, name)
      .map((at) => at - BUILTIN_NAME)
      .filter((entry) => entry > 0 && data.words[entry >>> 2]! > 0 && data.words[(entry + BUILTIN_FUNC) >>> 2]! > 0)
    if (entries.length !== 1) {
      throw new EngineError(`the engine's built-in function "${name}" was found ${entries.length} times; this build is not the one pgwasm supports`, {
        code: 'STARTUP_FAILED',
      })
    }
    found.set(name, entries[0]!)
  }
  return found
}

/** The client the engine runs statements for: an id for its locks, and the pid it was told. */
export interface EngineClient {
  readonly id: number
  readonly pid: number
  /** Its rules on the utility statements it runs (utility-hook.ts). */
  readonly checkUtility?: UtilityCheck
  /** Its own namespace of SQL-level prepared statements (utility-hook.ts). */
  readonly statementName?: StatementNames
  /** Ends or cancels a pid that is no client of this engine; true when it was someone's. */
  readonly signalOther?: (pid: number, signal: 'terminate' | 'cancel') => boolean
}

interface Held {
  exclusive: Map<number, number>
  shared: Map<number, number>
}

type Fn = (...args: number[]) => number

/** Per-client answers of pg_backend_pid() and the advisory locks (see the top of this file). */
export class ClientFunctions {
  readonly callbacks: number[] = []
  readonly #mod: PostgresModule
  readonly #ex: WebAssembly.Exports
  readonly #guards: SessionGuards
  readonly #entries: Map<string, number>
  readonly #utility: UtilityHook
  #client: EngineClient | undefined
  /** Session-level advisory locks: lock key -> holders (client id -> count) by mode. */
  readonly #locks = new Map<string, Held>()
  /** The clients seen since they connected: pid -> id. */
  readonly #clients = new Map<number, number>()
  /** Clients pg_terminate_backend() asked to end, not yet taken by the server. */
  #terminations: number[] = []
  /** Counts the session advisory locks let go of, so a server can tell when a refused lock may be free. */
  releases = 0
  /** Counts the transaction-level advisory lock calls that reached Postgres' own function, and pg_notify(), lo_open() and pg_export_snapshot() calls. */
  #boundCalls = 0

  /**
   * How many calls and statements so far took something that lasts until
   * the transaction ends and that the block's state (transaction-block.ts)
   * does not show: a transaction-level advisory lock, a notification
   * (`pg_notify()`, NOTIFY), LOCK TABLE, a large-object descriptor, an
   * exported snapshot. A count that only grows.
   */
  get blockBoundCalls(): number {
    return this.#boundCalls + this.#utility.blockBoundStatements
  }
  /** The key of the last advisory lock refused because another client holds it (undefined once taken). */
  refusedLock: string | undefined

  constructor(mod: PostgresModule, instance: WebAssembly.Instance, engine: WebAssembly.Module, guards: SessionGuards, known?: GuardRecords) {
    this.#mod = mod
    this.#ex = instance.exports
    this.#guards = guards
    let entries = builtinsByEngine.get(engine)
    if (!entries) {
      const heapBase = (instance.exports.__heap_base as WebAssembly.Global).value as number
      entries = (known && checkKnown(mod.HEAPU8, heapBase, known)) ?? locate(mod.HEAPU8, heapBase)
      builtinsByEngine.set(engine, entries)
    }
    this.#entries = entries
    this.#utility = new UtilityHook(mod, instance, guards)
  }

  /** Points the built-in table's entries at the per-client versions; call once per module, before Postgres starts. */
  install(): void {
    const mod = this.#mod
    const view = new DataView(mod.HEAPU8.buffer)
    const table = this.#ex.__indirect_function_table as WebAssembly.Table
    for (const [name, entry] of this.#entries) {
      const op = OVERRIDDEN.get(name)!
      const native = table.get(view.getUint32(entry + BUILTIN_FUNC, true)) as Fn
      const replacement = mod.addFunction((fcinfo: number) => this.#call(op, fcinfo, native), 'ii')
      this.callbacks.push(replacement)
      view.setUint32(entry + BUILTIN_FUNC, replacement, true)
    }
    this.#utility.install()
    this.callbacks.push(...this.#utility.callbacks)
  }

  /** Runs `capture` (a snapshot of the module's memory) with the utility hook out of it. */
  withoutHooks<T>(capture: () => T): T {
    return this.#utility.unplaced(capture)
  }

  /** The module's memory was replaced by a snapshot's: put the utility hook back in its place. */
  restored(): void {
    this.#utility.place()
  }

  /** The client whose statements run from now on; undefined for an in-process caller. */
  setClient(client: EngineClient | undefined): void {
    this.#client = client
    this.#utility.setCheck(client?.checkUtility)
    this.#utility.setStatementNames(client?.statementName)
    if (client && client.id !== 0) this.#clients.set(client.pid, client.id)
  }

  /** The pids of the clients holding session lock `key` in either mode (0: an in-process caller). */
  holders(key: string): number[] {
    const held = this.#locks.get(key)
    if (!held) return []
    const pids: number[] = []
    for (const id of new Set([...held.exclusive.keys(), ...held.shared.keys()])) {
      if (id === 0) pids.push(0)
      else for (const [pid, known] of this.#clients) if (known === id) pids.push(pid)
    }
    return pids
  }

  /** The rows `pg_stat_activity` lists while a server serves this engine; undefined: the engine's own. */
  activity: (() => readonly ActivityRow[] | undefined) | undefined

  /** How many statements so far may have changed what a prepared statement refers to (utility-hook.ts). */
  get catalogChanges(): number {
    return this.#utility.catalogChanges
  }

  /** Ids of the clients pg_terminate_backend() asked to end since the last call. */
  takeTerminations(): number[] {
    const ended = this.#terminations
    if (ended.length > 0) this.#terminations = []
    return ended
  }

  /** Releases every session advisory lock of client `id` (it left). */
  forgetClient(id: number): void {
    for (const [pid, known] of this.#clients) if (known === id) this.#clients.delete(pid)
    for (const [key, held] of this.#locks) {
      if (held.exclusive.delete(id)) this.releases++
      if (held.shared.delete(id)) this.releases++
      if (held.exclusive.size === 0 && held.shared.size === 0) this.#locks.delete(key)
    }
  }

  /** Forgets every lock and client (the module starts another database). */
  reset(): void {
    this.#locks.clear()
    this.#clients.clear()
    this.#terminations = []
    this.#client = undefined
    this.activity = undefined
    this.#utility.setCheck(undefined)
    this.#utility.setStatementNames(undefined)
  }

  #call(op: Op, fcinfo: number, native: Fn): number {
    switch (op.kind) {
      case 'pid':
        return this.#client ? this.#client.pid : native(fcinfo)
      case 'terminate':
      case 'cancel': {
        // Another client of the server: only the server can end it (after this statement). Nothing of
        // another client runs while this statement does, so a cancel has nothing to stop.
        const pid = new DataView(this.#mod.HEAPU8.buffer).getInt32(fcinfo + FCINFO_ARGS, true)
        const id = this.#clients.get(pid)
        if (id === undefined) return this.#client?.signalOther?.(pid, op.kind) ? 1 : native(fcinfo)
        if (op.kind === 'terminate' && !this.#terminations.includes(id)) this.#terminations.push(id)
        return 1
      }
      case 'lock':
        return this.#lock(this.#key(fcinfo, op.int4), op.mode, op.wait) ? 1 : 0
      case 'unlock':
        return this.#unlock(this.#key(fcinfo, op.int4), op.mode) ? 1 : 0
      case 'unlock-all':
        this.forgetClient(this.#owner)
        return 0
      case 'activity': {
        const rows = this.activity?.()
        return rows && reportActivity(this.#mod, this.#ex, fcinfo, rows) ? 0 : native(fcinfo)
      }
      case 'setting': {
        const view = new DataView(this.#mod.HEAPU8.buffer)
        // A NULL name is Postgres' own error to raise.
        const name = view.getUint8(fcinfo + FCINFO_ARGS + 4) ? null : this.#mod.UTF8ToString(this.#fn('text_to_cstring')(view.getUint32(fcinfo + FCINFO_ARGS, true)))
        const check = this.#client?.checkUtility
        if (check) {
          const refusal = check({ tag: 'SET', name, topLevel: false })
          if (refusal) this.#guards.raise(refusal)
        }
        if (name !== null) this.#utility.noteSetting(name)
        return native(fcinfo)
      }
      case 'xact': {
        const key = this.#key(fcinfo, op.int4)
        if (this.#conflicts(key, op.mode)) {
          if (op.wait) this.#refuse(key)
          return 0
        }
        this.#boundCalls++
        return native(fcinfo)
      }
      case 'block-bound':
        this.#boundCalls++
        return native(fcinfo)
    }
  }

  #fn(name: string): Fn {
    return this.#ex[name] as Fn
  }

  /** Client 0 is an in-process caller. */
  get #owner(): number {
    return this.#client?.id ?? 0
  }

  /** The lock's key as Postgres tells the two forms apart: one bigint, or two integers. */
  #key(fcinfo: number, int4: boolean): string {
    const view = new DataView(this.#mod.HEAPU8.buffer)
    const arg = (i: number): number => view.getUint32(fcinfo + FCINFO_ARGS + i * NULLABLE_DATUM, true)
    // A 4-byte Datum: int8 is passed by reference.
    return int4 ? `${view.getInt32(fcinfo + FCINFO_ARGS, true)}:${view.getInt32(fcinfo + FCINFO_ARGS + NULLABLE_DATUM, true)}` : view.getBigInt64(arg(0), true).toString()
  }

  /** Whether another client holds `key` in a mode that excludes `mode`. */
  #conflicts(key: string, mode: Mode): boolean {
    const held = this.#locks.get(key)
    if (!held) return false
    const owner = this.#owner
    const others = (m: Map<number, number>): boolean => [...m.keys()].some((id) => id !== owner)
    return others(held.exclusive) || (mode === 'exclusive' && others(held.shared))
  }

  #lock(key: string, mode: Mode, wait: boolean): boolean {
    if (this.#conflicts(key, mode)) {
      if (wait) this.#refuse(key)
      return false
    }
    let held = this.#locks.get(key)
    if (!held) this.#locks.set(key, (held = { exclusive: new Map(), shared: new Map() }))
    const counts = held[mode]
    counts.set(this.#owner, (counts.get(this.#owner) ?? 0) + 1)
    return true
  }

  #unlock(key: string, mode: Mode): boolean {
    const held = this.#locks.get(key)
    const count = held?.[mode].get(this.#owner) ?? 0
    if (count === 0) {
      this.#warn(`you don't own a lock of type ${mode === 'exclusive' ? 'ExclusiveLock' : 'ShareLock'}`)
      return false
    }
    if (count > 1) held![mode].set(this.#owner, count - 1)
    else {
      held![mode].delete(this.#owner)
      this.releases++
    }
    if (held!.exclusive.size === 0 && held!.shared.size === 0) this.#locks.delete(key)
    return true
  }

  /**
   * A wait for another client cannot happen inside the engine: that client
   * runs only after this statement ends. So the statement fails at once, as
   * under `lock_timeout`, with the SQLSTATE of a lock not available.
   */
  #refuse(key: string): never {
    this.refusedLock = key
    this.#guards.raise({
      code: '55P03',
      message: `could not obtain advisory lock ${key}: another client of this database holds it`,
      hint: 'Clients of one pgwasm database share one engine, which cannot wait for another client while it runs this statement. Retry later, or use pg_try_advisory_lock().',
    })
  }

  #warn(message: string): void {
    const mod = this.#mod
    const ex = this.#ex as Record<string, Fn | undefined>
    const errstart = ex.errstart
    const errmsg = ex.errmsg
    const errfinish = ex.errfinish
    if (!errstart || !errmsg || !errfinish) return
    const sp = mod.stackSave()
    try {
      if (errstart(WARNING, 0)) {
        errmsg(mod.stringToUTF8OnStack(message.replaceAll('%', '%%')), 0)
        errfinish(mod.stringToUTF8OnStack('pgwasm'), 0, mod.stringToUTF8OnStack('pgwasm'))
      }
    } finally {
      mod.stackRestore(sp)
    }
  }
}
