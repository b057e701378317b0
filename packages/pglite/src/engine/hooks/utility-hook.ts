import type { PostgresModule } from '../emscripten.js'
import type { RaisedError, SessionGuards } from './session-guards.js'
import { namesUnsafeLanguage, unsafeFunctionRefusal } from './function-storage.js'

/*
 * What `ProcessUtility_hook` sees of every utility statement, however it was
 * written (a Unicode-escaped identifier, a comment between words) and
 * wherever it runs (a DO block's or a function's dynamic SQL, `EXECUTE
 * format(...)`):
 * - a server's per-client rules on the statements that name session-wide
 *   objects (prepared statements, cursors, LISTEN channels), decided on
 *   what Postgres parsed rather than on the SQL text;
 * - a count of the statements that may change what a prepared statement's
 *   frozen parameter types or result columns refer to (DDL, `search_path`,
 *   the rollback of a transaction that ran DDL), so that statement caches
 *   prepare again instead of serving a statement Postgres can no longer
 *   plan (`cache lookup failed for type`).
 * - a server client's SQL-level prepared statement names, given the
 *   client's own namespace (PREPARE, EXECUTE, DEALLOCATE, and the EXECUTE
 *   inside EXPLAIN and CREATE TABLE AS), as PostgreSQL's backends each
 *   have one;
 * - CREATE FUNCTION of the internal or C language, checked once it ran
 *   (function-storage.ts).
 * Its cost is one call into JavaScript per utility statement.
 */

/** A utility statement as the engine parsed it. */
export interface UtilityStatement {
  /**
   * Postgres' command tag: `DEALLOCATE`, `DEALLOCATE ALL`, `EXECUTE`,
   * `FETCH`, `UNLISTEN`, `SET`, `RESET`... A `set_config()` call is
   * reported as `SET` (not top-level), with the setting's name.
   */
  readonly tag: string
  /**
   * The prepared statement, cursor or channel it names, decoded (`null`:
   * all of them, as `DEALLOCATE ALL`, `CLOSE ALL`, `UNLISTEN *`). For a
   * statement that holds `EXECUTE`s (EXPLAIN, CREATE TABLE AS), one
   * statement is reported per `EXECUTE`, with tag `EXECUTE`.
   */
  readonly name: string | null
  /** False inside a function, a DO block or other dynamic SQL. */
  readonly topLevel: boolean
}

/** The ERROR a refused statement raises instead of running. */
export type UtilityRefusal = RaisedError

/** Decides on one statement; a refusal is raised as the statement's ERROR. */
export type UtilityCheck = (statement: UtilityStatement) => UtilityRefusal | undefined

/** The engine's name for a prepared statement a client's SQL names (see {@link UtilityHook.setStatementNames}). */
export type StatementNames = (name: string) => string

/**
 * `PlannedStmt.utilityStmt` on wasm32 in PostgreSQL 18 (type, commandType,
 * queryId and planId as int64, six bools, jitFlags, then fourteen pointers).
 */
const PLANNED_UTILITY_STMT = 88
/** `Query.utilityStmt` on wasm32 (type, commandType, querySource, queryId as int64, canSetTag). */
const QUERY_UTILITY_STMT = 28
/** `PROCESS_UTILITY_TOPLEVEL` in utility.h. */
const TOPLEVEL = 0
/**
 * Statements whose name is the first field after the node tag
 * (`DeallocateStmt.name`, `ExecuteStmt.name`, `PrepareStmt.name`,
 * `ClosePortalStmt.portalname`, `DeclareCursorStmt.portalname`,
 * `ListenStmt.conditionname`, `UnlistenStmt.conditionname`).
 */
const NAME_FIRST = new Set(['DEALLOCATE', 'DEALLOCATE ALL', 'EXECUTE', 'PREPARE', 'CLOSE CURSOR', 'CLOSE CURSOR ALL', 'DECLARE CURSOR', 'LISTEN', 'UNLISTEN'])
/** `VariableSetStmt`: its kind, then the setting's name (`null` for RESET ALL). */
const SETTING = new Set(['SET', 'RESET'])
const VARIABLE_SET_NAME = 8
/** `FetchStmt` has its portal name after the direction and count: read from the node's text form. */
const FETCHING = new Set(['FETCH', 'MOVE'])
/** Statements that may hold an `ExecuteStmt` that does not pass through the hook on its own. */
const HOLDING_EXECUTE = new Set(['EXPLAIN', 'CREATE TABLE AS', 'SELECT', 'CREATE MATERIALIZED VIEW'])
/** Statements checked with no name (they reach every client's objects). */
const NAMELESS = new Set(['DISCARD ALL', 'DISCARD TEMP'])
/**
 * Command tags of utility statements that change no catalog object a
 * prepared statement can name. `SET`/`RESET` count only for `search_path`
 * (name resolution); transaction ends count when DDL ran in the transaction.
 * EXPLAIN is left out: `EXPLAIN ANALYZE CREATE TABLE ... AS` creates.
 */
const CATALOG_UNCHANGED = [
  'BEGIN',
  'START TRANSACTION',
  'SAVEPOINT',
  'RELEASE',
  'SHOW',
  'PREPARE',
  'EXECUTE',
  'DEALLOCATE',
  'DEALLOCATE ALL',
  'DECLARE CURSOR',
  'FETCH',
  'MOVE',
  'CLOSE CURSOR',
  'CLOSE CURSOR ALL',
  'LISTEN',
  'UNLISTEN',
  'NOTIFY',
  'LOCK TABLE',
  'COPY',
  'DO',
  'CALL',
  'CHECKPOINT',
  'VACUUM',
  'ANALYZE',
  'LOAD',
  'SET CONSTRAINTS',
  'DISCARD PLANS',
  'DISCARD SEQUENCES',
]
/** `TransactionStmt.kind` (parsenodes.h): the kinds that end a transaction or undo part of it. */
const TRANSACTION_KIND = 4
const TRANS_STMT_COMMIT = 2
const TRANS_STMT_ROLLBACK = 3
const TRANS_STMT_ROLLBACK_TO = 6
const TRANS_STMT_PREPARE = 7

type Fn = (...args: number[]) => number

export class UtilityHook {
  readonly callbacks: number[] = []
  readonly #mod: PostgresModule
  readonly #ex: Record<string, Fn>
  readonly #guards: SessionGuards
  readonly #hookAt: number
  readonly #table: WebAssembly.Table
  #hook = 0
  /** What the hook pointed at before ours went in (0: Postgres' own processing). */
  #previous = 0
  #check: UtilityCheck | undefined
  #names: StatementNames | undefined

  /** Command tag enum values (`CommandTag`) of {@link CATALOG_UNCHANGED}, and of the statements read more closely. */
  #unchanged = new Set<number>()
  #tags = {
    begin: -1,
    start: -1,
    set: -1,
    reset: -1,
    commit: -1,
    rollback: -1,
    prepareTransaction: -1,
    createFunction: -1,
    createProcedure: -1,
    prepare: -1,
    execute: -1,
    deallocate: -1,
    explain: -1,
    createTableAs: -1,
    notify: -1,
    lockTable: -1,
  }
  /** A statement that counted ran in the current transaction: its end (a rollback may undo it) counts too. */
  #changedInTransaction = false
  /** Counts the NOTIFY and LOCK TABLE statements run (see `ClientFunctions.blockBoundCalls`). */
  blockBoundStatements = 0
  /**
   * How many statements so far may have changed what a prepared statement
   * refers to (a count that only grows; see the file comment).
   */
  catalogChanges = 0

  constructor(mod: PostgresModule, instance: WebAssembly.Instance, guards: SessionGuards) {
    this.#mod = mod
    this.#ex = instance.exports as unknown as Record<string, Fn>
    this.#guards = guards
    this.#hookAt = (instance.exports.ProcessUtility_hook as WebAssembly.Global).value as number
    this.#table = instance.exports.__indirect_function_table as WebAssembly.Table
  }

  /** Registers the hook function and puts it in place; call once per module, before Postgres starts. */
  install(): void {
    this.#hook = this.#mod.addFunction((pstmt: number, query: number, readOnly: number, context: number, params: number, env: number, dest: number, qc: number) => {
      // The statement and its command tag, read once for everything below.
      const node = new DataView(this.#mod.HEAPU8.buffer).getUint32(pstmt + PLANNED_UTILITY_STMT, true)
      const tag = node === 0 ? -1 : this.#ex.CreateCommandTag!(node)
      if (node !== 0) {
        if (tag === this.#tags.notify || tag === this.#tags.lockTable) this.blockBoundStatements++
        this.#count(node, tag)
        const check = this.#check
        if (check) this.#decide(check, node, tag, context)
        const names = this.#names
        if (names) {
          const renamed = this.#renamed(names, pstmt, node, tag, readOnly !== 0)
          if (renamed !== pstmt) {
            pstmt = renamed
            readOnly = 0
          }
        }
      }
      const next = this.#previous === 0 ? this.#ex.standard_ProcessUtility! : (this.#table.get(this.#previous) as Fn)
      next(pstmt, query, readOnly, context, params, env, dest, qc)
      // A CREATE FUNCTION is never renamed: `node` is the tree that ran.
      if (tag === this.#tags.createFunction || tag === this.#tags.createProcedure) this.#checkFunctions(node)
      return 0
    }, 'viiiiiiii')
    this.callbacks.push(this.#hook)
    const sp = this.#mod.stackSave()
    try {
      const tag = (name: string): number => this.#ex.GetCommandTagEnum!(this.#mod.stringToUTF8OnStack(name))
      this.#unchanged = new Set(CATALOG_UNCHANGED.map(tag))
      this.#tags = {
        begin: tag('BEGIN'),
        start: tag('START TRANSACTION'),
        set: tag('SET'),
        reset: tag('RESET'),
        commit: tag('COMMIT'),
        rollback: tag('ROLLBACK'),
        prepareTransaction: tag('PREPARE TRANSACTION'),
        createFunction: tag('CREATE FUNCTION'),
        createProcedure: tag('CREATE PROCEDURE'),
        prepare: tag('PREPARE'),
        execute: tag('EXECUTE'),
        deallocate: tag('DEALLOCATE'),
        explain: tag('EXPLAIN'),
        createTableAs: tag('CREATE TABLE AS'),
        notify: tag('NOTIFY'),
        lockTable: tag('LOCK TABLE'),
      }
    } finally {
      this.#mod.stackRestore(sp)
    }
    this.place()
  }

  /**
   * Puts the hook in place: at install (before Postgres starts, so before
   * any library could set one), and again after a snapshot's memory
   * replaced the module's. Snapshots are taken without ours
   * ({@link unplaced}); one that holds another hook holds a library's
   * (`pg_stat_statements`) that chained itself on top of ours and calls it.
   */
  place(): void {
    const heap = new DataView(this.#mod.HEAPU8.buffer)
    const current = heap.getUint32(this.#hookAt, true)
    if (current !== 0) return
    this.#previous = 0
    heap.setUint32(this.#hookAt, this.#hook, true)
  }

  /**
   * Runs `capture` (a snapshot) with the hook taken out, so that the memory
   * it copies never points at this module's function: a module that
   * restores it may hold the hook at another table slot. A library that
   * chained itself on top of ours stays as it is.
   */
  unplaced<T>(capture: () => T): T {
    const at = this.#hookAt
    const placed = new DataView(this.#mod.HEAPU8.buffer).getUint32(at, true) === this.#hook
    if (placed) new DataView(this.#mod.HEAPU8.buffer).setUint32(at, this.#previous, true)
    try {
      return capture()
    } finally {
      if (placed) new DataView(this.#mod.HEAPU8.buffer).setUint32(at, this.#hook, true)
    }
  }

  /** The check for the statements that run from now on; undefined: none. */
  setCheck(check: UtilityCheck | undefined): void {
    this.#check = check
  }

  /**
   * How the statements that run from now on name SQL-level prepared
   * statements in the engine (undefined: as written). The name is given
   * before the check has seen it.
   */
  setStatementNames(names: StatementNames | undefined): void {
    this.#names = names
  }

  /**
   * `pstmt` with its prepared statement names as {@link StatementNames}
   * gives them: the statement itself (PREPARE, EXECUTE, DEALLOCATE) or
   * the EXECUTE that EXPLAIN or CREATE TABLE AS holds. A tree the caller
   * keeps (`readOnly`: a cached plan, SPI's) is copied first, as
   * Postgres's own utility code copies before it changes one.
   */
  #renamed(names: StatementNames, pstmt: number, statement: number, tag: number, readOnly: boolean): number {
    const ex = this.#ex
    /** Where the name is in `node` (the statement, of tag `tag`), or 0. */
    const at = (node: number): number => {
      if (tag === this.#tags.prepare || tag === this.#tags.execute || tag === this.#tags.deallocate) return node
      if (tag !== this.#tags.explain && tag !== this.#tags.createTableAs) return 0
      // ExplainStmt.query and CreateTableAsStmt.query are the first field after the tag: parse
      // analysis made it a Query whose utilityStmt is the ExecuteStmt.
      const view = new DataView(this.#mod.HEAPU8.buffer)
      const query = view.getUint32(node + 4, true)
      if (query === 0 || ex.CreateCommandTag!(query) !== this.#tags.execute) return 0
      const execute = view.getUint32(query + QUERY_UTILITY_STMT, true)
      return execute !== 0 && this.#text(execute).startsWith('{EXECUTESTMT') ? execute : 0
    }
    let node = at(statement)
    if (node === 0) return pstmt
    const nameAt = new DataView(this.#mod.HEAPU8.buffer).getUint32(node + 4, true)
    // DEALLOCATE ALL names none.
    if (nameAt === 0) return pstmt
    const name = this.#mod.UTF8ToString(nameAt)
    const given = names(name)
    if (given === name) return pstmt
    if (readOnly) {
      pstmt = ex.copyObjectImpl!(pstmt)
      node = at(new DataView(this.#mod.HEAPU8.buffer).getUint32(pstmt + PLANNED_UTILITY_STMT, true))
    }
    const sp = this.#mod.stackSave()
    try {
      const copy = ex.pstrdup!(this.#mod.stringToUTF8OnStack(given))
      new DataView(this.#mod.HEAPU8.buffer).setUint32(node + 4, copy, true)
    } finally {
      this.#mod.stackRestore(sp)
    }
    return pstmt
  }

  /** A setting changed outside a SET statement (`set_config()`). */
  noteSetting(name: string): void {
    if (!resolvesNames(name)) return
    this.#changedInTransaction = true
    this.catalogChanges++
  }

  /** Counts the statement in {@link catalogChanges} when it may change what prepared statements refer to. */
  #count(node: number, tag: number): void {
    const view = new DataView(this.#mod.HEAPU8.buffer)
    const tags = this.#tags
    // What ran before a transaction block was committed on its own.
    if (tag === tags.begin || tag === tags.start) this.#changedInTransaction = false
    if (this.#unchanged.has(tag)) return
    if (tag === tags.set || tag === tags.reset) {
      const name = view.getUint32(node + VARIABLE_SET_NAME, true)
      // RESET ALL has no name.
      if (name !== 0 && !resolvesNames(this.#mod.UTF8ToString(name))) return
    } else if (tag === tags.commit || tag === tags.rollback || tag === tags.prepareTransaction) {
      const kind = view.getInt32(node + TRANSACTION_KIND, true)
      const ends = kind === TRANS_STMT_COMMIT || kind === TRANS_STMT_ROLLBACK || kind === TRANS_STMT_PREPARE
      if (!ends && kind !== TRANS_STMT_ROLLBACK_TO) return
      if (!this.#changedInTransaction) return
      if (ends) this.#changedInTransaction = false
      this.catalogChanges++
      return
    }
    this.#changedInTransaction = true
    this.catalogChanges++
  }

  /** A function of the internal or C language, refused unless stored as the function it names (function-storage.ts). */
  #checkFunctions(node: number): void {
    if (!namesUnsafeLanguage(this.#text(node))) return
    const refusal = unsafeFunctionRefusal(this.#mod, this.#ex)
    if (refusal) this.#guards.raise(refusal)
  }

  #decide(check: UtilityCheck, node: number, tagEnum: number, context: number): void {
    const mod = this.#mod
    const view = new DataView(mod.HEAPU8.buffer)
    const tag = mod.UTF8ToString(this.#ex.GetCommandTagName!(tagEnum))
    const topLevel = context === TOPLEVEL
    const statements: UtilityStatement[] = []
    if (NAME_FIRST.has(tag)) {
      const name = view.getUint32(node + 4, true)
      statements.push({ tag, name: name === 0 ? null : mod.UTF8ToString(name), topLevel })
    } else if (SETTING.has(tag)) {
      const name = view.getUint32(node + VARIABLE_SET_NAME, true)
      statements.push({ tag, name: name === 0 ? null : mod.UTF8ToString(name), topLevel })
    } else if (FETCHING.has(tag)) {
      statements.push({ tag, name: fieldToken(this.#text(node), 'portalname'), topLevel })
    } else if (HOLDING_EXECUTE.has(tag)) {
      for (const name of executedNames(this.#text(node))) statements.push({ tag: 'EXECUTE', name, topLevel })
    } else if (NAMELESS.has(tag)) {
      statements.push({ tag, name: null, topLevel })
    }
    for (const statement of statements) {
      const refusal = check(statement)
      if (refusal) this.#guards.raise(refusal)
    }
  }

  /** The node's text form (`nodeToString`), allocated in the statement's memory context. */
  #text(node: number): string {
    return this.#mod.UTF8ToString(this.#ex.nodeToString!(node))
  }
}

/** Whether setting `name` changes what names in SQL resolve to. */
function resolvesNames(name: string): boolean {
  return name.toLowerCase() === 'search_path'
}

/**
 * A string field of a node's text form: `:field <token>`, the token with
 * outfuncs' backslash escapes; `<>` is NULL, `""` the empty string.
 */
export function fieldToken(text: string, field: string, from = 0): string | null {
  const at = text.indexOf(` :${field} `, from)
  if (at < 0) return null
  let i = at + field.length + 3
  if (text.startsWith('<>', i)) return null
  if (text.startsWith('""', i)) return ''
  let token = ''
  for (; i < text.length; i++) {
    const c = text[i]!
    if (c === '\\' && i + 1 < text.length) token += text[++i]
    else if (c === ' ' || c === '\n' || c === '\t' || c === '}' || c === ')') break
    else token += c
  }
  return token
}

/** The names of the `EXECUTE`s held in a node's text form. */
export function executedNames(text: string): (string | null)[] {
  const names: (string | null)[] = []
  for (let at = text.indexOf('{EXECUTESTMT'); at >= 0; at = text.indexOf('{EXECUTESTMT', at + 1)) names.push(fieldToken(text, 'name', at))
  return names
}
