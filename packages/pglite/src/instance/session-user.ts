/** `PGlite.lockSessionUser()` in its turn: the role's checks, then the lock. */
import type { Backend } from '../engine/backend/backend.js'
import { EngineError } from '../engine/engine-error.js'
import type { QueryRunner } from '../query/runner.js'
import { quoteIdent } from '../quote-ident.js'

export function lockSessionUser(backend: Backend, runner: QueryRunner, role: string): void {
  const locked = backend.lockedSessionUser
  if (locked === role) return
  const bad = (why: string): EngineError => new EngineError(`cannot run the session as "${role}": ${why}`, { code: 'BAD_ROLE' })
  if (locked !== undefined) throw bad(`it runs as "${locked}" for good`)
  if (backend.inTransaction) throw bad('a transaction block is open')
  const found = runner.query(
    `select rolsuper, pg_has_role(rolname, 'pg_checkpoint', 'member') as checkpoints from pg_catalog.pg_roles where rolname = $1`,
    [role],
    undefined,
  ).rows as { rolsuper: boolean; checkpoints: boolean }[]
  if (found.length === 0) throw bad('no such role')
  if (found[0]!.rolsuper) throw bad('it is a superuser, which would change nothing')
  // clone() and dumpDataDir() take a CHECKPOINT in the session.
  if (!found[0]!.checkpoints) runner.exec(`grant pg_checkpoint to ${quoteIdent(role)}`, undefined)
  backend.lockSessionUser(role)
}
