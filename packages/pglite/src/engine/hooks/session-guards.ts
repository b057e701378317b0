import { EngineError } from '../engine-error.js'
import type { PostgresModule } from '../emscripten.js'
import { holdsCString, pointersTo, readStaticData } from '../loading/static-data.js'

/*
 * Guards that keep one client's SQL from ending the engine every client
 * shares, installed in Postgres' own extension points: GUC check hooks and
 * the object access hook. The GUC records are found by name in the
 * engine's static data; their layout is PostgreSQL 18's `guc_tables.h` on
 * wasm32 (a 92-byte `config_generic`, then the type's fields), checked by
 * the tests against the engine's own behaviour.
 */

const GENERIC_BYTES = 92
/** `T *variable`, the first field after `config_generic`. */
const VARIABLE = GENERIC_BYTES
/** `config_bool`: variable, boot_val (padded to 4), then check_hook. */
const BOOL_CHECK_HOOK = GENERIC_BYTES + 8
/** `config_int`: variable, boot_val, min, max, then check_hook. */
const INT_CHECK_HOOK = GENERIC_BYTES + 16
/** `config_string`: variable, boot_val, then check_hook. */
const STRING_CHECK_HOOK = GENERIC_BYTES + 8

/** `ERROR` in `elog.h`. */
const ERROR = 21
/** `OAT_POST_CREATE` in `objectaccess.h`; `TableSpaceRelationId` in `pg_tablespace.h`. */
const OAT_POST_CREATE = 0
const TABLESPACE_RELATION_ID = 1213
/** Relations below this oid are the system catalogs themselves (their oids are fixed in the catalog headers). */
const FIRST_GENBKI_OBJECT_ID = 10000
/** `List` (pg_list.h, wasm32): its length, and the pointer to its cells (4 bytes each). */
const LIST_LENGTH = 4
const LIST_ELEMENTS = 12
/** `RTEPermissionInfo` (parsenodes.h, wasm32): the relation, and the 64-bit `requiredPerms` (low word read). */
const PERM_RELID = 4
const PERM_REQUIRED = 16
/** ACL_INSERT | ACL_UPDATE | ACL_DELETE */
const ACL_WRITE = (1 << 0) | (1 << 2) | (1 << 3)

/**
 * The largest `max_stack_depth`, in kB: the engine's shadow stack is 8 MiB
 * of linear memory with nothing guarding its end, so a deeper setting would
 * let recursion overwrite static data instead of raising an ERROR.
 */
export const MAX_STACK_DEPTH_KB = 7680

const GUARDED = [
  'exit_on_error',
  'max_stack_depth',
  'idle_in_transaction_session_timeout',
  'idle_session_timeout',
  'transaction_timeout',
  'statement_timeout',
  'shared_preload_libraries',
  'session_preload_libraries',
  'local_preload_libraries',
  'session_authorization',
] as const
const PRELOAD_LISTS = ['shared_preload_libraries', 'session_preload_libraries', 'local_preload_libraries'] as const
type GuardedGuc = (typeof GUARDED)[number]

/** Record addresses are static: found once per compiled engine. */
const recordsByEngine = new WeakMap<WebAssembly.Module, Map<GuardedGuc, number>>()

/** Addresses of the guarded settings' records by name, as the package build found them for one engine build. */
export type GuardRecords = Readonly<Record<string, number>>

/** The record addresses found for `engine` in this process, for the package build to ship (scripts/make-template.ts). */
export function guardRecordsOf(engine: WebAssembly.Module): GuardRecords | undefined {
  const records = recordsByEngine.get(engine)
  return records && Object.fromEntries(records)
}

/**
 * The shipped addresses when every one still holds the record of its
 * setting (its name pointer names it, its variable lies in static data):
 * searching the engine's 11 MB of static data costs ~100 ms per process.
 */
function checkKnownRecords(heap: Uint8Array, heapBase: number, known: GuardRecords): Map<GuardedGuc, number> | undefined {
  const view = new DataView(heap.buffer, heap.byteOffset, heapBase)
  const records = new Map<GuardedGuc, number>()
  for (const name of GUARDED) {
    const at = known[name]
    if (at === undefined || at <= 0 || at % 4 !== 0 || at + VARIABLE + 4 > heapBase) return undefined
    const variable = view.getUint32(at + VARIABLE, true)
    if (variable <= 0 || variable >= heapBase || !holdsCString(heap, view.getUint32(at, true), name)) return undefined
    records.set(name, at)
  }
  return records
}

function locateRecords(heap: Uint8Array, heapBase: number): Map<GuardedGuc, number> {
  const data = readStaticData(heap, heapBase)
  const records = new Map<GuardedGuc, number>()
  for (const name of GUARDED) {
    // A setting's record starts with its name pointer; its variable lies in static data.
    const found = pointersTo(data, name).filter((at) => {
      const variable = data.words[(at + VARIABLE) >>> 2]!
      return variable > 0 && variable < heapBase
    })
    if (found.length !== 1) {
      throw new EngineError(`the engine's setting "${name}" was found ${found.length} times; this build is not the one pgwasm supports`, {
        code: 'STARTUP_FAILED',
      })
    }
    records.set(name, found[0]!)
  }
  return records
}

/** The names of a `*_preload_libraries` list (comma-separated, optionally double-quoted). */
function splitLibraryList(list: string): string[] {
  return list
    .split(',')
    .map((item) => item.trim().replace(/^"(.*)"$/, '$1'))
    .filter((item) => item !== '')
}

/** Where Postgres looks for a library named in a preload list (`$libdir`, `.so` added). */
function libraryPath(name: string): string {
  const path = name.startsWith('$libdir/') ? `/pglite/lib/postgresql/${name.slice(8)}` : name.includes('/') ? name : `/pglite/lib/postgresql/${name}`
  return path.endsWith('.so') ? path : `${path}.so`
}

/** Five SQLSTATE characters packed as Postgres' `MAKE_SQLSTATE` does. */
function sqlstate(code: string): number {
  let packed = 0
  for (let i = 0; i < 5; i++) packed += ((code.charCodeAt(i) - 48) & 0x3f) << (6 * i)
  return packed
}

export interface RaisedError {
  readonly code: string
  readonly message: string
  readonly hint?: string
}

type Fn = (...args: number[]) => number

/**
 * V8 and JavaScriptCore throw RangeError "Maximum call stack size
 * exceeded", Firefox InternalError "too much recursion". Kept to plain
 * string checks: this runs with the stack nearly full.
 */
export function isStackOverflow(e: unknown): boolean {
  if (!(e instanceof Error)) return false
  return (e instanceof RangeError && e.message.includes('call stack')) || (e.name === 'InternalError' && e.message.includes('recursion'))
}

/** Emscripten's setjmp/longjmp emulation throws instances of this glue class. */
function isLongjmp(e: unknown): boolean {
  return typeof e === 'object' && e !== null && e.constructor?.name === 'EmscriptenSjLj'
}

const STACK_DEPTH_ERROR: RaisedError = {
  code: '54001',
  message: 'stack depth limit exceeded',
  hint: 'The statement nests or recurses deeper than the JavaScript stack that runs the engine allows; max_stack_depth cannot raise that limit.',
}

/**
 * Wraps the glue's `invoke_*` imports: the calls a function that holds a
 * `PG_TRY` (setjmp) makes. A JavaScript stack overflow below such a call
 * becomes Postgres' 54001 ERROR raised at that call, so the `PG_CATCH`
 * blocks above it clean up (portals, snapshots, memory contexts) exactly as
 * they do for any ERROR. Without this the overflow unwinds past them and
 * leaves the session unusable, or ends the engine.
 */
export function catchStackOverflows(
  env: Record<string, unknown>,
  memory: WebAssembly.Memory,
  guards: () => SessionGuards | undefined,
): void {
  // PG_exception_stack as it is when the call is made: the handler of the
  // calling function's PG_TRY, or of one of its callers, alive either way.
  // Read through a cached view. A growth detaches the old buffer, which
  // leaves the view empty: a length check costs far less than reading
  // `memory.buffer` on each of the ~34 calls of a primary-key lookup.
  // (A shared memory is not detached, but the address is static data,
  // inside the buffer the view was made of.)
  let words = new Uint32Array(memory.buffer)
  let handlerAt = 0
  const handler = (): number => {
    if (handlerAt === 0) handlerAt = guards()?.exceptionStackAddress ?? 0
    if (words.length === 0) words = new Uint32Array(memory.buffer)
    return handlerAt === 0 ? 0 : words[handlerAt >>> 2]!
  }
  for (const name of Object.keys(env)) {
    const invoke = env[name]
    if (!name.startsWith('invoke_') || typeof invoke !== 'function') continue
    const returnsI64 = name.startsWith('invoke_j')
    env[name] = (...args: number[]): unknown => {
      const caught = handler()
      try {
        return (invoke as (...a: number[]) => unknown)(...args)
      } catch (e) {
        const g = guards()
        if (!g || !isStackOverflow(e)) throw e
        g.raiseInInvoke(e, caught)
        return returnsI64 ? 0n : undefined
      }
    }
  }
}

/**
 * The engine-side half of our guards. `raise` reports an ERROR through
 * Postgres' own `ereport` machinery, from JavaScript called by the engine
 * (a hook) or between two of its calls; it does not return.
 */
export class SessionGuards {
  readonly callbacks: number[] = []
  readonly #mod: PostgresModule
  readonly #ex: WebAssembly.Exports
  readonly #records: Map<GuardedGuc, number>

  readonly #mayLoad: (path: string) => string | undefined
  /** The role the session is locked to (see `lockSessionUser`), if any. */
  #lockedUser: string | undefined

  /**
   * `mayLoad` tells why a library path may not be loaded, or undefined when
   * it may; `known` are record addresses shipped for this engine build.
   */
  constructor(
    mod: PostgresModule,
    instance: WebAssembly.Instance,
    engine: WebAssembly.Module,
    mayLoad: (path: string) => string | undefined,
    known?: GuardRecords,
  ) {
    this.#mayLoad = mayLoad
    this.#mod = mod
    this.#ex = instance.exports
    let records = recordsByEngine.get(engine)
    if (!records) {
      const heapBase = (this.#ex.__heap_base as WebAssembly.Global).value as number
      records = (known && checkKnownRecords(mod.HEAPU8, heapBase, known)) ?? locateRecords(mod.HEAPU8, heapBase)
      recordsByEngine.set(engine, records)
    }
    this.#records = records
  }

  /** Installs the hooks; call once per module, before Postgres starts. */
  install(): void {
    const mod = this.#mod
    const exitOnError = mod.addFunction((newval: number) => {
      if (mod.HEAPU8[newval] === 0) return 1
      this.#checkDetail(
        'pgwasm runs every client on one engine, and exit_on_error would end that engine (and with an in-memory database, its data) at the first error.',
      )
      return 0
    }, 'iiii')
    const stackDepth = mod.addFunction((newval: number) => {
      const kb = new DataView(mod.HEAPU8.buffer).getInt32(newval, true)
      if (kb <= MAX_STACK_DEPTH_KB) return 1
      this.#checkDetail(`The engine's stack is 8 MB; max_stack_depth can be at most ${MAX_STACK_DEPTH_KB}kB here.`)
      return 0
    }, 'iiii')
    const objectAccess = mod.addFunction((access: number, classId: number) => {
      if (access === OAT_POST_CREATE && classId === TABLESPACE_RELATION_ID) {
        this.raise({
          code: '0A000',
          message: 'tablespaces are not supported by pgwasm',
          hint: 'Every table lives in the data directory; create the table without TABLESPACE.',
        })
      }
      return 0
    }, 'viiiii')
    // The preload lists are checked when set (ALTER SYSTEM included), so a
    // refused library is reported to whoever set it, not at the next start.
    const preloadList = mod.addFunction((newval: number) => {
      const list = mod.UTF8ToString(new DataView(mod.HEAPU8.buffer).getUint32(newval, true))
      for (const library of splitLibraryList(list)) {
        const refusal = this.#mayLoad(libraryPath(library))
        if (refusal === undefined) continue
        this.#checkDetail(refusal)
        return 0
      }
      return 1
    }, 'iiii')
    // Chained in front of Postgres' own check (role exists, privileges), which it then calls.
    const sessionRecord = this.#records.get('session_authorization')!
    const ownCheck = new DataView(mod.HEAPU8.buffer).getUint32(sessionRecord + STRING_CHECK_HOOK, true)
    const table = this.#ex.__indirect_function_table as WebAssembly.Table
    const sessionUser = mod.addFunction((newval: number, extra: number, source: number) => {
      const locked = this.#lockedUser
      if (locked !== undefined) {
        const value = mod.UTF8ToString(new DataView(mod.HEAPU8.buffer).getUint32(newval, true))
        if (value !== locked) {
          this.#checkDetail(`This session runs as role "${locked}" for good (lockSessionUser, pgwasm-server --role); it cannot become another session user.`)
          return 0
        }
      }
      return ownCheck === 0 ? 1 : (table.get(ownCheck) as Fn)(newval, extra, source)
    }, 'iiii')
    // Rows of the catalogs changed by hand (an UPDATE of pg_database's name,
    // a DELETE from pg_namespace) leave a database that does not open again,
    // or tables no query reaches. Extension scripts still may (old upgrade
    // scripts do): creating_extension is set while one runs.
    // Runs at the start of every query: no allocation unless memory grew.
    const creatingExtension = this.#global('creating_extension')
    let view = new DataView(mod.HEAPU8.buffer)
    const checkPerms = mod.addFunction((_rangeTable: number, permInfos: number) => {
      if (permInfos === 0) return 1
      if (view.buffer !== mod.HEAPU8.buffer) view = new DataView(mod.HEAPU8.buffer)
      if (view.getUint8(creatingExtension) !== 0) return 1
      const cells = view.getUint32(permInfos + LIST_ELEMENTS, true)
      for (let i = view.getInt32(permInfos + LIST_LENGTH, true) - 1; i >= 0; i--) {
        const info = view.getUint32(cells + i * 4, true)
        const relid = view.getUint32(info + PERM_RELID, true)
        if (relid >= FIRST_GENBKI_OBJECT_ID || (view.getUint32(info + PERM_REQUIRED, true) & ACL_WRITE) === 0) continue
        const name = (this.#ex.get_rel_name as Fn | undefined)?.(relid) ?? 0
        this.raise({
          code: '42501',
          message: `pgwasm does not let SQL change the rows of the system catalog ${name ? mod.UTF8ToString(name) : `with oid ${relid}`}`,
          hint: 'Use the commands that manage it (ALTER DATABASE, ALTER ROLE, DROP SCHEMA ...): rows changed by hand can leave a database that no longer opens.',
        })
      }
      return 1
    }, 'iiii')
    this.callbacks.push(exitOnError, stackDepth, objectAccess, preloadList, sessionUser, checkPerms)
    const heap = new DataView(mod.HEAPU8.buffer)
    heap.setUint32(sessionRecord + STRING_CHECK_HOOK, sessionUser, true)
    for (const name of PRELOAD_LISTS) heap.setUint32(this.#records.get(name)! + STRING_CHECK_HOOK, preloadList, true)
    heap.setUint32(this.#records.get('exit_on_error')! + BOOL_CHECK_HOOK, exitOnError, true)
    heap.setUint32(this.#records.get('max_stack_depth')! + INT_CHECK_HOOK, stackDepth, true)
    heap.setUint32(this.#global('object_access_hook'), objectAccess, true)
    heap.setUint32(this.#global('ExecutorCheckPerms_hook'), checkPerms, true)
  }

  /**
   * Makes `role` the session user for good: the session runs as it, RESET
   * SESSION AUTHORIZATION and DISCARD ALL come back to it, and SQL can no
   * longer make another role the session user (a check on
   * `session_authorization`). Call inside a transaction block, between
   * requests; an ERROR (a missing role) throws what the error longjmp throws.
   */
  lockSessionUser(role: string): void {
    this.setSessionUser(role, true)
  }

  /** Makes `role` the session user and the value RESET goes back to; `lock`: for good (see `lockSessionUser`). */
  setSessionUser(role: string, lock: boolean): void {
    const mod = this.#mod
    const sp = mod.stackSave()
    const before = this.#lockedUser
    if (lock) this.#lockedUser = role
    try {
      // PGC_BACKEND, PGC_S_OVERRIDE: what InitPostgres does for the user a
      // client logs in as, so it is also the value RESET goes back to.
      ;(this.#ex.SetConfigOption as Fn)(mod.stringToUTF8OnStack('session_authorization'), mod.stringToUTF8OnStack(role), 4, 10)
    } catch (e) {
      this.#lockedUser = before
      throw e
    } finally {
      mod.stackRestore(sp)
    }
  }

  /** The name of the session user now (inside a transaction: it reads the catalog). */
  sessionUserName(): string {
    const ex = this.#ex as Record<string, Fn>
    return this.#mod.UTF8ToString(ex.GetUserNameFromId!(ex.GetSessionUserId!(), 0))
  }

  /** The role the session is locked to, if any. */
  get lockedSessionUser(): string | undefined {
    return this.#lockedUser
  }

  /** Forgets the lock: the module is about to serve another database (a restore). */
  forgetSessionUser(): void {
    this.#lockedUser = undefined
  }

  /** The current value, in ms, of one of the timeout settings. */
  timeoutMs(name: 'idle_in_transaction_session_timeout' | 'idle_session_timeout' | 'transaction_timeout' | 'statement_timeout'): number {
    const heap = new DataView(this.#mod.HEAPU8.buffer)
    return heap.getInt32(heap.getUint32(this.#records.get(name)! + VARIABLE, true), true)
  }

  /**
   * Where an ERROR jumps to. Read between requests, it is the main loop's
   * handler; `PG_TRY` blocks deeper in a request point it at their own.
   */
  get exceptionStackAddress(): number {
    return this.#global('PG_exception_stack')
  }

  get exceptionStack(): number {
    return new DataView(this.#mod.HEAPU8.buffer).getUint32(this.#global('PG_exception_stack'), true)
  }

  /**
   * In an `invoke_*` import whose call overflowed the JavaScript stack (the
   * glue's own wrapper has restored the engine's stack pointer): raises
   * 54001 there and leaves the engine as the glue leaves it after a
   * longjmp, for the caller to resume at its setjmp. Rethrows `cause` when
   * that is not safe (a critical section), and lets a raise that itself
   * overflows go on up to the next caller, which tries again.
   */
  raiseInInvoke(cause: unknown, exceptionStack: number): void {
    if (this.inCriticalSection) throw cause
    const mod = this.#mod
    const sp = mod.stackSave()
    try {
      ;(this.#ex.FlushErrorState as Fn)()
      this.raise(STACK_DEPTH_ERROR, exceptionStack)
    } catch (jump) {
      if (!isLongjmp(jump)) throw jump
      mod.stackRestore(sp)
      ;(this.#ex.setThrew as Fn)(1, 0)
    }
  }

  /** Raises 54001 between two engine calls, after an overflow no `invoke_*` caught. */
  raiseStackDepth(exceptionStack: number): never {
    ;(this.#ex.FlushErrorState as Fn)()
    this.raise(STACK_DEPTH_ERROR, exceptionStack)
  }

  /** Whether the engine is inside a critical section (an ERROR there is a PANIC). */
  get inCriticalSection(): boolean {
    return new DataView(this.#mod.HEAPU8.buffer).getUint32(this.#global('CritSectionCount'), true) !== 0
  }

  /**
   * Raises an ERROR in the engine: throws what Postgres' error longjmp
   * throws, for the caller's request loop to recover from as from any
   * ERROR. Error context callbacks are dropped first, and the error
   * handler reset to `exceptionStack` when given: after a JavaScript stack
   * overflow both point into frames that no longer exist.
   */
  raise(error: RaisedError, exceptionStack?: number): never {
    const mod = this.#mod
    const ex = this.#ex as Record<string, Fn>
    const heap = new DataView(mod.HEAPU8.buffer)
    heap.setUint32(this.#global('error_context_stack'), 0, true)
    if (exceptionStack !== undefined) heap.setUint32(this.#global('PG_exception_stack'), exceptionStack, true)
    const str = (s: string): number => mod.stringToUTF8OnStack(s.replaceAll('%', '%%'))
    if (ex.errstart!(ERROR, 0)) {
      ex.errcode!(sqlstate(error.code))
      ex.errmsg!(str(error.message), 0)
      if (error.hint) ex.errhint!(str(error.hint), 0)
      ex.errfinish!(str('pgwasm'), 0, str('pgwasm'))
    }
    throw new EngineError(`the engine did not raise "${error.message}"`, { code: 'ENGINE_ABORT' })
  }

  #checkDetail(detail: string): void {
    const mod = this.#mod
    const sp = mod.stackSave()
    try {
      const copy = (this.#ex.pstrdup as Fn)(mod.stringToUTF8OnStack(detail))
      new DataView(mod.HEAPU8.buffer).setUint32(this.#global('GUC_check_errdetail_string'), copy, true)
    } finally {
      mod.stackRestore(sp)
    }
  }

  /**
   * Marks the running statement canceled, as Postgres' SIGINT handler does:
   * the cancel flags, then the process latch, so that a wait in progress
   * (`pg_sleep`, which polls the latch) returns to its interrupt check,
   * which raises 57014. The latch's `is_set` is its first field.
   */
  requestCancel(): void {
    const heap = new DataView(this.#mod.HEAPU8.buffer)
    heap.setInt32(this.#global('QueryCancelPending'), 1, true)
    heap.setInt32(this.#global('InterruptPending'), 1, true)
    const latch = heap.getUint32(this.#global('MyLatch'), true)
    if (latch !== 0) heap.setInt32(latch, 1, true)
  }

  /** Drops a cancel the statement finished before it saw, so that it cannot cancel the next one. */
  clearCancel(): void {
    new DataView(this.#mod.HEAPU8.buffer).setInt32(this.#global('QueryCancelPending'), 0, true)
  }

  #global(name: string): number {
    return (this.#ex[name] as WebAssembly.Global).value as number
  }
}
