// The types a backend takes and gives, and what its errors say to a user.
import type { DataTree } from '../files/pgdata-tree.js'
import type { PostgresModule } from '../emscripten.js'

/** What the engine writes to: one chunk of backend wire bytes at a time. */
export interface ProtocolSink {
  /** `bytes` is a view into WASM memory, valid only during the call. */
  onChunk(bytes: Uint8Array): void
}

export type DataDirMount =
  | { readonly kind: 'memory'; readonly tree: DataTree }
  | { readonly kind: 'node'; readonly path: string }

export interface BackendOptions {
  readonly mount: DataDirMount
  readonly username: string
  readonly database: string
  /** Postgres command-line arguments after `--single`, before `-D`. */
  readonly startArgs: readonly string[]
  readonly initialMemory?: number
  readonly onLog?: (line: string) => void
  /**
   * Runs on the created module before Postgres starts (contrib files and
   * side modules). The table's length after it is noted: snapshots of the
   * backend then carry the links Postgres makes (dynamic-links.ts), and a
   * restore needs a module prepared the same way.
   */
  readonly prepare?: (mod: PostgresModule) => Promise<void>
  /** Runs once the data directory is in place, before Postgres starts (e.g. to journal its changes). */
  readonly afterMount?: (mod: PostgresModule) => void
}

/** A session timeout that ran out between two requests. */
export interface ExpiredTimeout {
  /** The SQLSTATE Postgres uses for it: 25P03 (idle in transaction) or 25P04 (transaction). */
  readonly code: '25P03' | '25P04'
  readonly setting: 'idle_in_transaction_session_timeout' | 'transaction_timeout'
  readonly ms: number
}

/** The timeout settings of the session, in ms; 0 means off. */
export interface SessionTimeouts {
  readonly idleInTransactionSessionTimeout: number
  readonly idleSessionTimeout: number
  readonly transactionTimeout: number
  readonly statementTimeout: number
}

/** An empty sink for requests whose output nobody reads. */
export const discard: ProtocolSink = { onChunk() {} }

/**
 * What a crash says to a user: Postgres' PANIC or FATAL lines (the abort
 * itself only says `Aborted()`), and what can be done about a damaged
 * data directory.
 */
export function explainCrash(log: readonly string[], cause: unknown): string {
  const lines = log.filter((line) => /\b(PANIC|FATAL):/.test(line)).map((line) => line.replace(/^.*?\b(PANIC|FATAL):\s*/, '$1: '))
  if (lines.length === 0) return String(cause)
  const damaged = lines.some((line) => /pg_control|checkpoint record|WAL|invalid|could not read|could not open|corrupt/i.test(line))
  const advice = damaged
    ? ' The data directory is damaged or incomplete (a file was truncated, removed or overwritten): restore it from a backup or a dump (dumpDataDir, pgwasm-dump); it cannot be opened as it is.'
    : ''
  return `${lines.slice(-3).join(' | ')}.${advice}`
}
