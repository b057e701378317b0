/**
 * The schema engine's connection to a database: every query it sends goes
 * into one transaction held while a command runs, so a command applies
 * whole or not at all; its shadow database is a fresh in-memory instance.
 */
import type {
  IsolationLevel,
  SqlDriverAdapter,
  SqlMigrationAwareDriverAdapterFactory,
  SqlQuery,
  SqlResultSet,
  Transaction,
} from '@prisma/driver-adapter-utils'
import { DatabaseError, PGlite, type Transaction as PGliteTx } from '@pgwasm/pglite'
import { splitStatements } from '@pgwasm/pglite/sql'
import { toAdapterError } from './errors.js'
import { ADAPTER_NAME, PGliteQueryable, type QueryTarget } from './queryable.js'

/** A script that failed inside the held transaction: the error and the statement it came from. */
interface ScriptFailure {
  readonly error: DatabaseError
  readonly statement: string | undefined
}

/**
 * Where the engine's queries go: one transaction held on the database
 * while a command runs, so the command applies whole or not at all.
 */
export class HeldSession {
  #tx: PGliteTx | undefined
  #finish: ((commit: boolean) => void) | undefined
  #done: Promise<void> | undefined
  #savepoints = 0
  lastFailure: ScriptFailure | undefined

  constructor(readonly db: PGlite) {}

  /** The open transaction, or the database itself between commands. */
  get target(): QueryTarget & Pick<PGliteTx, 'exec'> {
    return this.#tx ?? this.db
  }

  async begin(): Promise<void> {
    this.lastFailure = undefined
    await new Promise<void>((started, failed) => {
      const outcome = new Promise<boolean>((settle) => {
        this.#finish = settle
      })
      this.#done = this.db.transaction(async (tx) => {
        this.#tx = tx
        started()
        if (!(await outcome)) await tx.rollback()
      })
      this.#done.catch(failed)
    })
  }

  /** Commits (or rolls back) what the command did. */
  async end(commit: boolean): Promise<void> {
    const done = this.#done
    this.#finish?.(commit)
    this.#tx = undefined
    this.#finish = undefined
    this.#done = undefined
    await done
  }

  nextSavepoint(): string {
    return `pgwasm_engine_${++this.#savepoints}`
  }

  /**
   * Runs a script under a savepoint: a failure is rolled back to it, so the
   * engine can still record the failure before the whole command is undone.
   */
  async runScript(script: string): Promise<void> {
    const target = this.target
    if (!this.#tx) {
      await target.exec(script)
      return
    }
    const savepoint = this.nextSavepoint()
    await target.exec(`SAVEPOINT ${savepoint}`)
    try {
      await target.exec(script)
      await target.exec(`RELEASE SAVEPOINT ${savepoint}`)
    } catch (error) {
      await target.exec(`ROLLBACK TO SAVEPOINT ${savepoint}`)
      if (error instanceof DatabaseError) this.lastFailure = { error, statement: await this.#failingStatement(script, error, savepoint) }
      throw error
    }
  }

  /**
   * The statement of `script` that failed: the one holding the error's
   * position when the server gave one; otherwise found by running the
   * statements one by one (undone afterwards).
   */
  async #failingStatement(script: string, error: DatabaseError, savepoint: string): Promise<string | undefined> {
    const position = error.position ? Number.parseInt(error.position, 10) - 1 : NaN
    const statements = splitStatements(script).map(({ start, end }) => ({ text: script.slice(start, end), end }))
    // A position in the blanks or comments between two statements belongs to the next one.
    if (Number.isFinite(position)) return statements.find((s) => position < s.end)?.text
    if (statements.length === 1) return statements[0]!.text
    const target = this.target
    let failing: string | undefined
    for (const statement of statements) {
      try {
        await target.exec(statement.text)
      } catch {
        failing = statement.text
        break
      }
    }
    await target.exec(`ROLLBACK TO SAVEPOINT ${savepoint}`)
    return failing
  }
}

/** PostgreSQL 18 lists NOT NULL constraints in pg_constraint (contype 'n'); this engine build panics on them. */
const NOT_NULL_CONSTRAINT = 'n'

/** The engine's connection: queries into the held session, with PostgreSQL 18's catalog made readable for it. */
class EngineAdapter extends PGliteQueryable implements SqlDriverAdapter {
  readonly #session: HeldSession
  readonly #onDispose: (() => Promise<void>) | undefined

  constructor(session: HeldSession, onDispose?: () => Promise<void>) {
    super(() => session.target, () => session.db.parsers)
    this.#session = session
    this.#onDispose = onDispose
  }

  override async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    const result = await super.queryRaw(query)
    // The engine's constraint query keeps every contype but p, u and f; NOT
    // NULL constraints are columns' nullability, which it reads elsewhere.
    const column = result.columnNames.indexOf('constraint_type')
    if (column >= 0) result.rows = result.rows.filter((row) => row[column] !== NOT_NULL_CONSTRAINT)
    return result
  }

  async executeScript(script: string): Promise<void> {
    try {
      await this.#session.runScript(script)
    } catch (error) {
      throw toAdapterError(error)
    }
  }

  async startTransaction(_isolationLevel?: IsolationLevel): Promise<Transaction> {
    return new SavepointTransaction(this.#session)
  }

  getConnectionInfo(): { supportsRelationJoins: boolean } {
    return { supportsRelationJoins: true }
  }

  async dispose(): Promise<void> {
    await this.#onDispose?.()
  }
}

/** A transaction of the engine inside the held one: a savepoint. */
class SavepointTransaction extends PGliteQueryable implements Transaction {
  readonly options = { usePhantomQuery: true }
  readonly #session: HeldSession
  readonly #name: string
  readonly #begun: Promise<unknown>

  constructor(session: HeldSession) {
    super(() => session.target, () => session.db.parsers)
    this.#session = session
    this.#name = session.nextSavepoint()
    this.#begun = session.target.exec(`SAVEPOINT ${this.#name}`)
  }

  override async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    await this.#begun
    return super.queryRaw(query)
  }

  override async executeRaw(query: SqlQuery): Promise<number> {
    await this.#begun
    return super.executeRaw(query)
  }

  async commit(): Promise<void> {
    await this.#begun
    await this.#session.target.exec(`RELEASE SAVEPOINT ${this.#name}`)
  }

  async rollback(): Promise<void> {
    await this.#begun
    await this.#session.target.exec(`ROLLBACK TO SAVEPOINT ${this.#name}`)
    await this.#session.target.exec(`RELEASE SAVEPOINT ${this.#name}`)
  }
}

/** The factory the engine is given: its connection is the held session; its shadow database a fresh in-memory one. */
export function engineFactory(session: HeldSession): SqlMigrationAwareDriverAdapterFactory {
  return {
    provider: 'postgres',
    adapterName: ADAPTER_NAME,
    connect: async () => new EngineAdapter(session),
    connectToShadowDb: async () => {
      const shadow = await PGlite.create()
      return new EngineAdapter(new HeldSession(shadow), () => shadow.close())
    },
  }
}
