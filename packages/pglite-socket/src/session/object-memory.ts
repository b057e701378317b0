import type { EngineLease, UtilityRefusal } from '@pgwasm/pglite'

/*
 * What one client's session-wide objects (named prepared statements, SQL
 * PREPAREs, cursors) hold of the memory ceiling (`maxMemory`) of the engine
 * every client shares. On a server each backend's statements live in its
 * own memory; here one client's would take the memory the others'
 * statements need, until the engine refuses everyone (53200) or, with no
 * ceiling, the process dies.
 *
 * A client's share is measured as the change of the engine's held memory
 * (`EngineLease.memoryShare`) across its requests that make or drop such
 * objects, never across the others'. That includes what a request left
 * behind besides its objects (a relation cache entry); it is a bound, not an
 * inventory. A new object is refused with 53200, for that client only, when
 * - the client holds more than {@link OWN_SHARE} of the ceiling, or
 * - the engine holds more than {@link CROWDED_SHARE} and the client more than
 *   {@link SMALL_SHARE} (a few attackers together cannot shut out a client
 *   that makes a few statements), or
 * - the engine holds more than {@link FULL_SHARE} (what is left is for
 *   running statements).
 * Without a ceiling nothing is measured.
 */

/** The share of the ceiling one client's objects may hold. */
export const OWN_SHARE = 0.25
/** Past this share of the ceiling held in all, only clients holding less than {@link SMALL_SHARE} make new objects. */
export const CROWDED_SHARE = 0.5
export const SMALL_SHARE = 1 / 32
/** Past this share held in all, nobody makes new objects. */
export const FULL_SHARE = 0.75

const percent = (share: number): string => `${Math.round(share * 100)}%`

export class ObjectMemory {
  /** Share of the ceiling this client's objects hold, as measured. */
  #own = 0
  /** The engine's share when the request being measured began; undefined: none is. */
  #from: number | undefined

  /**
   * The refusal of a new object when the engine holds `held` of its
   * ceiling now (0: no ceiling), or undefined. Inside a measured request,
   * what it made so far counts.
   */
  refusal(held: number): UtilityRefusal | undefined {
    if (held === 0) return undefined
    const own = this.#from === undefined ? this.#own : Math.max(0, this.#own + held - this.#from)
    let why: string | undefined
    if (own > OWN_SHARE) why = `This client's prepared statements and cursors hold ${percent(own)} of the memory ceiling of the engine every client of this server shares; each client may hold ${percent(OWN_SHARE)}.`
    else if (held > FULL_SHARE) why = `The engine every client of this server shares holds ${percent(held)} of its memory ceiling; past ${percent(FULL_SHARE)} the rest is kept for running statements.`
    else if (held > CROWDED_SHARE && own > SMALL_SHARE) {
      why = `The engine every client of this server shares holds ${percent(held)} of its memory ceiling, and this client's prepared statements and cursors ${percent(own)}; past ${percent(CROWDED_SHARE)} only clients holding less than ${percent(SMALL_SHARE)} make new ones.`
    }
    if (why === undefined) return undefined
    return { code: '53200', message: 'out of memory', hint: `${why} Close some (DEALLOCATE, CLOSE, or a protocol Close) to make another.` }
  }

  /** A request that may make or drop objects runs from now, with the engine holding `held` (kept when one is already measured). */
  measureFrom(held: number): void {
    if (this.#from === undefined) this.#from = held
  }

  /** The measured request ended with the engine holding `held`: the change is this client's. */
  settle(held: number): void {
    if (this.#from === undefined) return
    this.#own = Math.max(0, this.#own + held - this.#from)
    this.#from = undefined
  }

  /** Whether a request is being measured. */
  get measuring(): boolean {
    return this.#from !== undefined
  }
}

/** A client's {@link ObjectMemory}, measured on the engine while its batch runs there. */
export class LeaseObjectMemory {
  readonly #memory = new ObjectMemory()
  /** The engine while this client's batch runs on it, for the utility rules to measure (undefined between batches). */
  #lease: EngineLease | undefined

  /**
   * @param claim notes an SQL-prepared statement (`s` and its name) as this
   *   client's as it is made, not only by the catalog read after the batch:
   *   that read fails when the batch left the engine out of memory, and the
   *   statement would outlive its client.
   */
  constructor(readonly claim: (key: string) => void) {}

  /** The utility rules' objectMade (`prepared`: a PREPARE's name): asked while this client's batch runs on the engine, and only then. */
  readonly made = (prepared?: string): UtilityRefusal | undefined => {
    if (!this.#lease) return undefined
    const refusal = this.#measure(this.#lease, true)
    if (!refusal && prepared !== undefined) this.claim(`s${prepared}`)
    return refusal
  }

  /** The utility rules' objectDropped. */
  readonly dropped = (): void => {
    if (this.#lease) this.#measure(this.#lease, false)
  }

  /**
   * Before a batch that makes a named prepared statement (`names`) or closes
   * an object (`closes`): its refusal, or undefined with the batch measured.
   */
  admit(lease: EngineLease, names: boolean, closes: boolean): UtilityRefusal | undefined {
    return names || closes ? this.#measure(lease, names) : undefined
  }

  /** The refusal of a new object (`makes`), or undefined with what runs from now measured. */
  #measure(lease: EngineLease, makes: boolean): UtilityRefusal | undefined {
    const held = lease.memoryShare()
    const refusal = makes ? this.#memory.refusal(held) : undefined
    if (!refusal) this.#memory.measureFrom(held)
    return refusal
  }

  /** This client's batch or script step runs on `lease` from now. */
  running(lease: EngineLease): void {
    this.#lease = lease
  }

  /** The end of a batch or script step on `lease`: what it made or dropped is this client's. */
  settle(lease: EngineLease): void {
    this.#lease = undefined
    if (this.#memory.measuring) this.#memory.settle(lease.memoryShare())
  }
}
