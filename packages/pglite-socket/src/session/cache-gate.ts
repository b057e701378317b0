import { Backend, Frontend } from '@pgwasm/pglite/protocol'
import type { EngineLease } from '@pgwasm/pglite'
import { PARSE_COMPLETE, UnnamedStatementCache, type CachePlan } from './unnamed-cache.js'
import { closeStatement, nulAfter } from './frame-edits.js'
import type { FrameReader } from '../wire/frame-reader.js'
import { concat, copyOut, readInt32 } from '../wire/wire.js'

const ignore = (): void => {}

/** Where the output a gate lets through goes (the session's OutputSplitter). */
export interface GatedOutput {
  push(bytes: Uint8Array): void
}

/**
 * One client's use of the unnamed-statement cache (unnamed-cache.ts): the
 * rewrite its current batch is, the output held until a cached statement is
 * known to have bound, and the cached statement that stands for its unnamed one.
 */
export class CacheGate {
  readonly #cache: UnnamedStatementCache
  /** The client's prepared statements as renamed on the engine (StatementRenamer.statements). */
  readonly #statements: Set<string>
  readonly #output: GatedOutput
  /** The statement-cache rewrite the current batch is, if any. */
  #batchPlan: CachePlan | undefined
  /** For a batch using the cache: 0 before its first output byte, then the first frame's type. */
  #firstOutput = 0
  /** Output of a cached-statement batch held until it is known to have bound. */
  readonly #held: Uint8Array[] = []
  /**
   * The cached statement that stands for this client's unnamed statement
   * (its last Parse of it was turned into that), so that a later Bind or
   * Describe of the unnamed statement finds the same SQL.
   */
  #unnamedAlias: Uint8Array | undefined

  constructor(prefix: string, maxMessageBytes: number, statements: Set<string>, output: GatedOutput) {
    this.#cache = new UnnamedStatementCache(prefix, maxMessageBytes)
    this.#statements = statements
    this.#output = output
  }

  /** A batch that uses the cache is running (its output goes through {@link pass}). */
  get active(): boolean {
    return this.#batchPlan !== undefined
  }

  /**
   * The cache's rewrite of everything buffered in `input`, taken from it,
   * when there is one: the batch to run next is its message.
   */
  begin(input: FrameReader): CachePlan | undefined {
    const plan = this.#cache.plan(input.bytes, input.offset, input.offset + input.buffered)
    if (!plan) return undefined
    input.skip(input.buffered)
    if (plan.kind === 'create') this.#statements.add(plan.entry.name)
    this.#batchPlan = plan
    this.#firstOutput = 0
    return plan
  }

  /** The batch {@link begin} gave is over (run or not). */
  end(): void {
    this.#batchPlan = undefined
    this.#held.length = 0
  }

  /**
   * The message to run for the current batch on `lease`: a cached statement
   * the engine's catalog or the multiplexer's epoch moved past is closed and
   * the batch runs as the client sent it.
   */
  messageFor(lease: EngineLease, message: Uint8Array, epoch: number): Uint8Array {
    const plan = this.#batchPlan
    if (plan?.kind === 'create') {
      plan.entry.epoch = epoch
      plan.entry.catalog = lease.catalogChanges
    } else if (plan && (plan.entry.epoch !== epoch || plan.entry.catalog !== lease.catalogChanges)) {
      // Something since its Parse may make the SQL mean another thing now: parse it as sent.
      this.#dropCached(lease, plan)
      return plan.original
    }
    return message
  }

  /**
   * Output of a batch that uses the statement cache. A 'create' only notes
   * the first frame (ParseComplete when the statement was made cleanly). A
   * 'reuse' holds its output until BindComplete, sending the ParseComplete
   * the client expects first, or an ErrorResponse, after which the output
   * is dropped and {@link settle} runs the batch as sent.
   * @returns whether `bytes` go on to the client now.
   */
  pass(bytes: Uint8Array): boolean {
    if (bytes.length === 0) return false
    const plan = this.#batchPlan!
    if (plan.kind === 'create') {
      if (this.#firstOutput === 0) this.#firstOutput = bytes[0]!
      return true
    }
    if (this.#firstOutput === Backend.BindComplete) return true
    if (this.#firstOutput === Backend.ErrorResponse) return false
    // Before the decision: hold the bytes and look for the deciding frame.
    const held = this.#held
    held.push(copyOut(bytes, 0, bytes.length))
    const all = held.length === 1 ? held[0]! : concat(held)
    let at = 0
    while (at + 5 <= all.length) {
      const type = all[at]!
      if (type === Backend.BindComplete || type === Backend.ErrorResponse) {
        this.#firstOutput = type
        held.length = 0
        if (type === Backend.ErrorResponse) return false
        this.#output.push(PARSE_COMPLETE)
        this.#output.push(all)
        return false
      }
      at += 1 + (readInt32(all, at + 1) >>> 0)
    }
    if (held.length > 1) {
      held.length = 0
      held.push(all)
    }
    return false
  }

  /**
   * After a batch that used the statement cache: records what the engine
   * made of it, and when a cached statement could not be bound (see
   * UnnamedStatementCache), closes it and runs the batch as the client sent
   * it, its output to `onOutput`.
   */
  settle(lease: EngineLease, onOutput: (bytes: Uint8Array) => void): void {
    const plan = this.#batchPlan
    if (!plan) return
    this.#batchPlan = undefined
    const first = this.#firstOutput
    if (plan.kind === 'create') {
      if (first === Backend.ParseComplete) this.#cache.created(plan)
      else this.#cache.refuse(plan, first !== Backend.ErrorResponse)
      if (first === Backend.ErrorResponse) this.#statements.delete(plan.entry.name)
      this.#unnamedAlias = first === Backend.ErrorResponse ? undefined : plan.entry.nameBytes
      return
    }
    if (first === Backend.BindComplete) {
      this.#unnamedAlias = plan.entry.nameBytes
      return
    }
    // Nothing ran (the failure came before BindComplete) and the implicit
    // transaction is over: the engine is idle, as before the batch.
    this.#dropCached(lease, plan)
    lease.execProtocolRawStream(plan.original, onOutput)
  }

  /** Forgets and closes the cached statement of `plan`; output from here on goes to the client as is. */
  #dropCached(lease: EngineLease, plan: CachePlan): void {
    this.#batchPlan = undefined
    this.#held.length = 0
    this.#cache.evict(plan)
    this.#statements.delete(plan.entry.name)
    this.#unnamedAlias = undefined
    lease.execProtocolRawStream(closeStatement(plan.entry.name), ignore)
  }

  /** The cached statement's name the frame at `at` must use for the unnamed statement, if it stands for one. */
  aliasFor(type: number, buffer: Uint8Array, at: number): Uint8Array | undefined {
    return this.#unnamedAlias !== undefined && this.#aliasUse(type, buffer, at) ? this.#unnamedAlias : undefined
  }

  /**
   * Whether the frame at `at` names the unnamed statement while it stands for
   * a cached one (a Bind of it, or a Describe of it); a Parse of the unnamed
   * statement, a simple Query or a Close of it ends the stand-in.
   */
  #aliasUse(type: number, buffer: Uint8Array, at: number): boolean {
    switch (type) {
      case Frontend.Bind:
        // The statement name follows the portal name.
        return buffer[nulAfter(buffer, at + 5, at + 1 + (readInt32(buffer, at + 1) >>> 0)) + 1] === 0
      case Frontend.Describe:
        return buffer[at + 5] === 0x53 /* S */ && buffer[at + 6] === 0
      case Frontend.Parse:
      case Frontend.Query:
        if (type === Frontend.Query || buffer[at + 5] === 0) this.#unnamedAlias = undefined
        return false
      case Frontend.Close:
        if (buffer[at + 5] === 0x53 /* S */ && buffer[at + 6] === 0) this.#unnamedAlias = undefined
        return false
      default:
        return false
    }
  }

  /** The connection ended: what it held for the engine goes now. */
  release(): void {
    this.#held.length = 0
  }
}
