import { DatabaseError } from './errors.js'

/**
 * The transaction could not commit because a statement in it failed:
 * COMMIT rolled it back instead (SQLSTATE `25P02`, in failed SQL
 * transaction). A {@link DatabaseError}, as PGlite's class of this name is.
 */
export class TransactionAbortedError extends DatabaseError {
  override name = 'TransactionAbortedError'

  constructor() {
    super('the transaction was rolled back because a statement in it failed', { code: '25P02', severity: 'ERROR' })
  }
}
