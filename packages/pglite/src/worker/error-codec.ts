/**
 * Errors across the worker boundary. Structured clone keeps only `message`
 * and `name` of an `Error`, and never its class, so a `DatabaseError` would
 * arrive as a bare `Error` without its SQLSTATE. Errors travel instead as
 * their class name plus every own field, and are rebuilt as the same class.
 */
import {
  ClosedError,
  DataDirLockedError,
  DatabaseError,
  EngineError,
  IncompatibleDataDirError,
  ProtocolError,
  type EngineErrorCode,
  type ProtocolErrorCode,
  type ServerFields,
} from '../errors.js'

/** The classes rebuilt on the page; anything else becomes an `Error` with the same `name` and `message`. */
export const WIRE_ERROR_KINDS = [
  'DatabaseError',
  'ProtocolError',
  'EngineError',
  'ClosedError',
  'DataDirLockedError',
  'IncompatibleDataDirError',
  'TypeError',
  'RangeError',
  'Error',
] as const

export type WireErrorKind = (typeof WIRE_ERROR_KINDS)[number]

/** An error as it crosses the boundary. */
export interface WireError {
  readonly kind: WireErrorKind
  readonly name: string
  readonly message: string
  readonly stack: string | undefined
  /** Own enumerable fields (`code`, `constraint`, `detail`, `log`, ...). */
  readonly fields: Record<string, unknown>
  readonly cause?: WireError
}

// Deep enough for an EngineError wrapping a RuntimeError wrapping its origin;
// a cyclic `cause` chain must not recurse forever.
const MAX_CAUSE_DEPTH = 4

function kindOf(error: Error): WireErrorKind {
  if (error instanceof DatabaseError) return 'DatabaseError'
  if (error instanceof ProtocolError) return 'ProtocolError'
  if (error instanceof EngineError) return 'EngineError'
  if (error instanceof ClosedError) return 'ClosedError'
  if (error instanceof DataDirLockedError) return 'DataDirLockedError'
  if (error instanceof IncompatibleDataDirError) return 'IncompatibleDataDirError'
  if (error instanceof TypeError) return 'TypeError'
  if (error instanceof RangeError) return 'RangeError'
  return 'Error'
}

function isPrimitive(value: unknown): boolean {
  return value === null || (typeof value !== 'object' && typeof value !== 'function' && typeof value !== 'symbol')
}

/**
 * Turns anything thrown into a cloneable {@link WireError}.
 * @param primitivesOnly keep only fields that are primitives: the fallback
 *   when a field (say, a parameter the worker made) would not clone.
 */
export function encodeError(thrown: unknown, primitivesOnly = false, depth = 0): WireError {
  if (!(thrown instanceof Error)) {
    return { kind: 'Error', name: 'Error', message: describeThrown(thrown), stack: undefined, fields: {} }
  }
  const fields: Record<string, unknown> = {}
  for (const key of Object.keys(thrown)) {
    if (key === 'name' || key === 'message' || key === 'stack') continue
    const value = (thrown as unknown as Record<string, unknown>)[key]
    if (typeof value === 'function' || typeof value === 'symbol') continue
    if (primitivesOnly && !isPrimitive(value)) continue
    fields[key] = value
  }
  const wire: { -readonly [K in keyof WireError]: WireError[K] } = {
    kind: kindOf(thrown),
    name: thrown.name,
    message: thrown.message,
    stack: thrown.stack,
    fields,
  }
  const cause: unknown = (thrown as { cause?: unknown }).cause
  if (cause !== undefined && depth < MAX_CAUSE_DEPTH) wire.cause = encodeError(cause, primitivesOnly, depth + 1)
  return wire
}

function describeThrown(thrown: unknown): string {
  if (typeof thrown === 'string') return thrown
  try {
    return `a non-Error value was thrown: ${String(thrown)}`
  } catch {
    return 'a non-Error value was thrown'
  }
}

/** Rebuilds the error as its own class, with every field it had in the worker. */
export function decodeError(wire: WireError): Error {
  const cause = wire.cause === undefined ? undefined : decodeError(wire.cause)
  const fields = wire.fields
  const withCause = cause === undefined ? undefined : { cause }
  let error: Error
  switch (wire.kind) {
    case 'DatabaseError':
      error = new DatabaseError(wire.message, fields as ServerFields, typeof fields.length === 'number' ? fields.length : 0)
      break
    case 'ProtocolError':
      error = new ProtocolError(wire.message, { code: fields.code as ProtocolErrorCode, cause })
      break
    case 'EngineError':
      error = new EngineError(wire.message, { code: fields.code as EngineErrorCode, cause, log: fields.log as string | undefined })
      break
    case 'ClosedError':
      error = new ClosedError(wire.message)
      break
    case 'DataDirLockedError':
      error = new DataDirLockedError(wire.message, { path: String(fields.path), holder: String(fields.holder) })
      break
    case 'IncompatibleDataDirError':
      error = new IncompatibleDataDirError(wire.message, {
        path: String(fields.path),
        dataDirVersion: String(fields.dataDirVersion),
        engineVersion: String(fields.engineVersion),
      })
      break
    case 'TypeError':
      error = new TypeError(wire.message, withCause)
      break
    case 'RangeError':
      error = new RangeError(wire.message, withCause)
      break
    default:
      error = new Error(wire.message, withCause)
      if (wire.name !== 'Error') error.name = wire.name
  }
  Object.assign(error, fields)
  if (cause !== undefined && !('cause' in error)) {
    Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true })
  }
  // The page-side stack would show only the message handler that rebuilt
  // the error; the worker's stack shows where it was thrown.
  if (wire.stack !== undefined) error.stack = wire.stack
  return error
}
