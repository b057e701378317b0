import type { EngineLease } from '@pgwasm/pglite'
import { concat, parameterStatus, queryMessage, readRows } from '../wire/wire.js'

/**
 * The settings PostgreSQL 18 reports to its clients (its `GUC_REPORT`
 * settings): sent at startup, and in a ParameterStatus before the
 * ReadyForQuery of any request that changed one, however it changed (SET,
 * RESET, `set_config()`, a function's SET clause, a rollback). Clients parse
 * dates and intervals by the DateStyle and IntervalStyle they were last told.
 */
export const REPORTED = [
  'application_name',
  'client_encoding',
  'DateStyle',
  'default_transaction_read_only',
  'in_hot_standby',
  'integer_datetimes',
  'IntervalStyle',
  'is_superuser',
  'scram_iterations',
  'search_path',
  'server_encoding',
  'server_version',
  'session_authorization',
  'standard_conforming_strings',
  'TimeZone',
] as const

/** The reported settings' values, as one client was last told them. */
export type ReportedSettings = ReadonlyMap<string, string>

/** What a client is told before the engine can be asked (it is in another client's transaction block). */
const ENGINE_DEFAULTS: ReportedSettings = new Map([
  ['application_name', ''],
  ['client_encoding', 'UTF8'],
  ['DateStyle', 'ISO, MDY'],
  ['default_transaction_read_only', 'off'],
  ['in_hot_standby', 'off'],
  ['integer_datetimes', 'on'],
  ['IntervalStyle', 'postgres'],
  ['is_superuser', 'on'],
  ['scram_iterations', '4096'],
  ['search_path', 'public'],
  ['server_encoding', 'UTF8'],
  ['standard_conforming_strings', 'on'],
  ['TimeZone', 'UTC'],
])

const READ = queryMessage(`select ${REPORTED.map((name) => `pg_catalog.current_setting('${name}', true)`).join(', ')}`)

/**
 * The reported settings as the session has them now; undefined when they
 * cannot be read (an aborted transaction block). Call at a Sync point.
 */
export function readReported(lease: EngineLease): ReportedSettings | undefined {
  const row = readRows(lease, READ)?.[0]
  if (!row) return undefined
  const values = new Map<string, string>()
  REPORTED.forEach((name, i) => values.set(name, row[i] ?? ''))
  return values
}

/**
 * The settings a client that could not be read for is told at startup:
 * the engine's defaults, with the values its startup packet asked for.
 */
export function assumedReported(user: string, applicationName: string, serverVersion: string): ReportedSettings {
  const values = new Map(ENGINE_DEFAULTS)
  values.set('application_name', applicationName)
  values.set('session_authorization', user)
  values.set('server_version', serverVersion)
  return values
}

/** ParameterStatus frames for each setting whose value differs from what the client was told; empty when none does. */
export function reportChanges(told: ReportedSettings, now: ReportedSettings): Uint8Array {
  const frames: Uint8Array[] = []
  for (const [name, value] of now) if (told.get(name) !== value) frames.push(parameterStatus(name, value))
  return frames.length === 0 ? EMPTY : concat(frames)
}

/** ParameterStatus frames for every setting, as startup sends them. */
export function reportAll(values: ReportedSettings): Uint8Array[] {
  return [...values].map(([name, value]) => parameterStatus(name, value))
}

const EMPTY = new Uint8Array(0)
