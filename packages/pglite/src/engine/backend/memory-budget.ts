import { collectGarbageSoon } from './collect-garbage.js'
import type { FsNode, MemFs, PostgresModule } from '../emscripten.js'

/**
 * One engine's memory ceiling (`maxMemory`): its heap (the WASM memory) and
 * the bytes of its in-memory files (tables and indexes of an in-memory
 * database, temporary files of sorts and hashes, `/tmp`) share one limit.
 * A heap request past it fails as a full heap does (malloc returns NULL:
 * `53200 out of memory`); a file that would grow past it fails as a full
 * disk does (ENOSPC: `53100 could not extend file`, or `could not write to
 * file` for a temporary file). Either way the statement fails and the
 * engine goes on, as a server's backend does.
 *
 * WAL segments are not counted and never refused: Postgres writes WAL inside
 * critical sections, where a failed write is a PANIC that would end the
 * engine (and an in-memory database with it); checkpoints bound them
 * (wal-checkpoints.ts). Files that share a template's bytes count only once
 * written (copied).
 *
 * A file growth is measured against the heap's size first, and when that
 * would refuse it, against what of the heap is in use (`heapInUse`): the
 * heap's freed pages stay with the process (WASM memory never shrinks), so
 * the process can hold up to about twice the ceiling, but a database is
 * never refused a row for memory a statement before it took and gave back.
 *
 * What a growth allocates can exceed what was asked (a heap grows by up to
 * 20%, at most 96 MiB; a file by doubling below 32 MiB, by 8 MiB steps
 * above): the limit bounds each request, so that slack is its margin.
 *
 * A statement refused at the limit leaves its files' arrays to the garbage
 * collector (its temporary files and the pages of a table it was filling),
 * as much as the limit: the process would hold them, uncounted, while the
 * next statement fills the budget again. So a refusal asks for a full
 * collection on the next turn, once the request has ended.
 *
 * Measured through pgwasm-server with a 256 MB ceiling and statements that
 * fill it (tests/runaway.test.ts in pglite-socket): the process's peak rose
 * about 1.2x the ceiling above its start on Node 20, and up to 2.7x on Node
 * 24, during a statement that filled it with a temporary file. Where Node 24
 * holds the rest was not found yet.
 */
export class MemoryBudget {
  /** Bytes (Infinity: none). */
  #limit = Infinity
  /** Counted bytes of in-memory files; kept only while a limit is set. */
  #fileBytes = 0
  /** Inside a counted file operation: nested ones (a write that expands) are its own. */
  #inside = false
  #mod: PostgresModule | undefined

  /**
   * @param heapBytes the heap's size now
   * @param maxHeapBytes the most the heap can grow to (the WASM memory's maximum)
   */
  constructor(
    readonly heapBytes: () => number,
    readonly maxHeapBytes = Infinity,
  ) {}

  /**
   * What of the heap is in use, when the engine can tell (its memory
   * contexts' blocks, plus static data and a margin for what is not
   * palloc'd). WASM memory never shrinks: after one statement took the heap
   * to the ceiling, counting its size would refuse every later file growth
   * (an in-memory database could not take another row) although most of
   * it was freed.
   */
  heapInUse: (() => number) | undefined

  /** Whether a limit is set: without one, file operations are neither checked nor counted. */
  get limited(): boolean {
    return this.#limit !== Infinity
  }

  /**
   * What the engine holds (the heap in use and the files) as a share of the
   * limit; 0 without a limit. A server measures its clients' session-wide
   * objects with it, so that one client's prepared statements leave the
   * others room to work.
   */
  share(): number {
    if (!this.limited) return 0
    // The heap cannot pass its own maximum, whatever the limit: a share of a limit it cannot reach would never fill.
    const reachable = Math.min(this.#limit, this.maxHeapBytes + this.#fileBytes)
    return ((this.heapInUse?.() ?? this.heapBytes()) + this.#fileBytes) / reachable
  }

  /** Sets the limit; the files are counted afresh (they were not while none was set). */
  setLimit(bytes: number | undefined): void {
    this.#limit = bytes ?? Infinity
    this.#fileBytes = this.limited && this.#mod ? treeBytes(this.#mod.FS.root) : 0
  }

  /** Whether the heap may grow to `size` bytes. */
  heapFits(size: number): boolean {
    if (size + this.#fileBytes <= this.#limit) return true
    this.#refused()
    return false
  }

  /**
   * Runs a file operation that may grow `node` by about `more` bytes:
   * refused with `refuse()` past the limit, and what it changed is counted.
   */
  fileChange<T>(node: FsNode, more: number, op: () => T, refuse: () => Error): T {
    if (!this.limited || this.#inside || !isCounted(node)) return op()
    if (more > 0 && mayRefuse(node) && !this.#fileFits(node, more)) {
      this.#refused()
      throw refuse()
    }
    const before = ownBytes(node)
    this.#inside = true
    try {
      return op()
    } finally {
      this.#inside = false
      this.#fileBytes += ownBytes(node) - before
    }
  }

  /**
   * Whether `node` may grow by `more`. Data grows only up to the limit less
   * a reserve; a small file (a catalog's, the first pages of a relation
   * TRUNCATE or DROP makes, a sort's first spill) may use the reserve: a
   * table filled to the limit must not leave the next statements, or the
   * TRUNCATE that would give the space back, unable to write a page.
   */
  #fileFits(node: FsNode, more: number): boolean {
    const reserve = Math.min(RESERVE_BYTES, this.#limit / 8)
    const cap = ownBytes(node) + more <= SMALL_FILE_BYTES ? this.#limit : this.#limit - reserve
    return this.heapBytes() + this.#fileBytes + more <= cap || (this.heapInUse?.() ?? Infinity) + this.#fileBytes + more <= cap
  }

  #collectAfter = 0

  #refused(): void {
    const now = performance.now()
    if (now < this.#collectAfter) return
    this.#collectAfter = now + 100
    collectGarbageSoon()
  }

  /** A file left the tree (unlinked, or replaced by a rename): its bytes no longer count. */
  fileGone(node: FsNode | undefined): void {
    if (!this.limited || !node || !isCounted(node)) return
    this.#fileBytes = Math.max(0, this.#fileBytes - ownBytes(node))
  }

  /** Counts the files of `mod`'s MEMFS from now on, and watches names leave. */
  attach(mod: PostgresModule): void {
    this.#mod = mod
    budgets.set(mod.MEMFS, this)
  }
}

const budgets = new WeakMap<MemFs, MemoryBudget>()

/** The budget of a module's MEMFS, if its backend set one up. */
export function budgetOf(memfs: MemFs): MemoryBudget | undefined {
  return budgets.get(memfs)
}

/** What a node of MEMFS holds of its own (a shared template array counts nothing until copied). */
export function ownBytes(node: FsNode): number {
  return !node.pgwasmShared && node.contents instanceof Uint8Array ? node.contents.length : 0
}

function isCounted(node: FsNode): boolean {
  return node.parent?.name !== 'pg_wal'
}

/** What of the limit only small files may use (at most an eighth of it). */
const RESERVE_BYTES = 64 * 1024 * 1024
/** A file this small after a growth may use the reserve. */
const SMALL_FILE_BYTES = 1024 * 1024
/** A relation's data file (`16384`, `16384_fsm`, `16384.3`, a temporary table's `t3_16384`): a failed extension is an ERROR. */
const RELATION_FILE = /^(?:t\d+_)?\d+(?:_(?:fsm|vm|init))?(?:\.\d+)?$/
/**
 * Folders of the cluster's own state (transaction status, multixacts,
 * two-phase state, replication, statistics): Postgres writes them in
 * critical sections and checkpoints, where a failed write is a PANIC that
 * ends the engine, so like WAL they are counted but never refused.
 */
const STATE_FOLDERS = new Set(['pg_xact', 'pg_subtrans', 'pg_multixact', 'offsets', 'members', 'pg_commit_ts', 'pg_serial', 'pg_notify', 'pg_twophase', 'pg_logical', 'snapshots', 'mappings', 'pg_replslot', 'pg_stat', 'pg_stat_tmp', 'pg_snapshots'])

/**
 * Whether a growth of `node` may be refused (ENOSPC): relation data,
 * temporary files and anything else a statement writes, but not the
 * cluster's state files: those above, and the control file, relation maps,
 * `PG_VERSION` and relation cache files beside the relations of `global/`
 * and `base/<db>/` (a relation map is written in a critical section).
 */
function mayRefuse(node: FsNode): boolean {
  if (RELATION_FILE.test(node.name)) return true
  const parent = node.parent
  if (!parent) return true
  if (STATE_FOLDERS.has(parent.name)) return false
  if (parent.name === 'pgsql_tmp') return true
  return !(parent.name === 'global' || parent.parent?.name === 'base')
}

function treeBytes(dir: FsNode): number {
  let total = 0
  const children = dir.contents
  if (!children || children instanceof Uint8Array) return 0
  for (const name in children) {
    const node = children[name]!
    if (node.contents instanceof Uint8Array) total += isCounted(node) ? ownBytes(node) : 0
    else if (node !== dir && node.contents) total += treeBytes(node)
  }
  return total
}
