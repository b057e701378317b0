/**
 * Maps pgwasm errors to the error kinds of Prisma's driver adapters, so the
 * client raises the codes Prisma users know (P2002, P2003, P2025 via the
 * engine, P2034...). Only the server's structured fields are read (SQLSTATE,
 * table, column, constraint, position), never the message text.
 */
import { DriverAdapterError, type Error as AdapterError, type MappedError } from '@prisma/driver-adapter-utils'
import { ClosedError, DatabaseError, EngineError } from '@pgwasm/pglite'

/**
 * The identifier the server's error position points at in `query`, e.g. the
 * relation of a 42P01 or the column reference of a 42703: the position is a
 * structured field (1-based, in characters), so this reads the SQL Prisma
 * sent, not the message.
 */
export function identifierAt(query: string | undefined, position: string | undefined): string | undefined {
  if (!query || !position) return undefined
  let i = Number.parseInt(position, 10) - 1
  if (!(i >= 0 && i < query.length)) return undefined
  const parts: string[] = []
  for (;;) {
    if (query[i] === '"') {
      let end = i + 1
      let name = ''
      for (;;) {
        const quote = query.indexOf('"', end)
        if (quote < 0) return undefined
        name += query.slice(end, quote)
        if (query[quote + 1] === '"') {
          name += '"'
          end = quote + 2
        } else {
          end = quote + 1
          break
        }
      }
      parts.push(name)
      i = end
    } else {
      const match = /^[A-Za-z_\u0080-\uffff][\w$\u0080-\uffff]*/.exec(query.slice(i, i + 128))
      if (!match) break
      parts.push(match[0].toLowerCase())
      i += match[0].length
    }
    if (query[i] !== '.') break
    i++
  }
  return parts.length > 0 ? parts.join('.') : undefined
}

function constraintOf(error: DatabaseError): { fields: string[] } | { index: string } | undefined {
  if (error.column) return { fields: [error.column] }
  if (error.constraint) return { index: error.constraint }
  return undefined
}

/** The adapter error kind of a PostgreSQL error, by SQLSTATE. */
export function mapDatabaseError(error: DatabaseError): MappedError {
  switch (error.code) {
    case '22001':
      return { kind: 'LengthMismatch', column: error.column }
    case '22003':
      return { kind: 'ValueOutOfRange', cause: error.message }
    case '22P02':
      return { kind: 'InvalidInputValue', message: error.message }
    case '23505':
      return {
        kind: 'UniqueConstraintViolation',
        constraint: error.constraint ? { index: error.constraint } : undefined,
        table: error.table,
      }
    case '23502':
      return { kind: 'NullConstraintViolation', constraint: error.column ? { fields: [error.column] } : undefined }
    case '23503':
      return { kind: 'ForeignKeyConstraintViolation', constraint: constraintOf(error) }
    case '23001':
      return { kind: 'RestrictViolation', constraint: constraintOf(error) }
    case '40001':
    case '40P01':
      return { kind: 'TransactionWriteConflict' }
    case '42P01':
      return { kind: 'TableDoesNotExist', table: error.table ?? identifierAt(error.query, error.position) }
    case '42703':
      return { kind: 'ColumnNotFound', column: error.column ?? identifierAt(error.query, error.position) }
    case '3D000':
      return { kind: 'DatabaseDoesNotExist' }
    case '42P04':
      return { kind: 'DatabaseAlreadyExists' }
    case '28000':
      return { kind: 'DatabaseAccessDenied' }
    case '28P01':
      return { kind: 'AuthenticationFailed' }
    case '53300':
      return { kind: 'TooManyConnections', cause: error.message }
    default:
      return {
        kind: 'postgres',
        code: error.code,
        severity: error.severity ?? 'ERROR',
        message: error.message,
        detail: error.detail,
        column: error.column,
        hint: error.hint,
      }
  }
}

/**
 * The error Prisma's engine should see for `error`: a {@link DriverAdapterError}
 * for database, closed-instance and dead-engine errors; anything else (a bug,
 * a bad argument) unchanged, which the engine reports as a JS error.
 */
export function toAdapterError(error: unknown): unknown {
  if (error instanceof DatabaseError) {
    const payload: AdapterError = { ...mapDatabaseError(error), originalCode: error.code, originalMessage: error.message }
    return new DriverAdapterError(payload)
  }
  if (error instanceof ClosedError || error instanceof EngineError) {
    return new DriverAdapterError({ kind: 'ConnectionClosed', originalMessage: error.message })
  }
  return error
}
