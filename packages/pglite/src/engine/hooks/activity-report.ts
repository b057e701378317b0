import type { PostgresModule } from '../emscripten.js'

/**
 * One connection as `pg_stat_activity` lists it: what a server knows of
 * each client of the one engine session, reported in the engine as the
 * backends of a PostgreSQL server are.
 */
export interface ActivityRow {
  /** As its BackendKeyData gave it (what `pg_backend_pid()` returns to it). */
  readonly pid: number
  readonly applicationName: string
  /** `active`, `idle`, `idle in transaction`, `idle in transaction (aborted)`. */
  readonly state: string
  /** Its running or last statement's text. */
  readonly query: string
  /** Set while it waits (for the engine another client holds: `IPC`). */
  readonly waitEventType?: string
  readonly waitEvent?: string
  /** Milliseconds since the epoch. */
  readonly backendStart: number
  readonly xactStart?: number
  readonly queryStart?: number
  readonly stateChange?: number
  readonly clientAddr?: string
  readonly clientPort?: number
}

/** `FunctionCallInfoBaseData` on wasm32: `resultinfo`, `nargs`, and the first argument (a `NullableDatum`). */
const FCINFO_RESULTINFO = 8
const FCINFO_NARGS = 18
const FCINFO_ARGS = 20
/** `ReturnSetInfo` on wasm32: the expected descriptor, and the tuplestore and descriptor `InitMaterializedSRF` sets. */
const RSINFO_EXPECTED = 8
const RSINFO_RESULT = 24
const RSINFO_DESC = 28
/** `pg_stat_get_activity`'s OUT columns in PostgreSQL 18. */
const COLUMNS = 31
const enum Col {
  Datid = 0,
  Pid,
  Usesysid,
  ApplicationName,
  State,
  Query,
  WaitEventType,
  WaitEvent,
  XactStart,
  QueryStart,
  BackendStart,
  StateChange,
  ClientAddr,
  ClientHostname,
  ClientPort,
  BackendXid,
  BackendXmin,
  BackendType,
  Ssl,
  SslVersion,
  SslCipher,
  SslBits,
  SslClientDn,
  SslClientSerial,
  SslIssuerDn,
  GssAuth,
  GssPrinc,
  GssEnc,
  GssDelegation,
  LeaderPid,
  QueryId,
}
/** `track_activity_query_size`'s default: Postgres keeps this many bytes of a query's text. */
const QUERY_BYTES = 1024
/** Microseconds from the Unix epoch to Postgres's (2000-01-01). */
const POSTGRES_EPOCH_MS = 946_684_800_000

type Fn = (...args: number[]) => number

/**
 * Answers a call of `pg_stat_get_activity(pid)` with `rows` (the one whose
 * pid the argument names, or all for NULL), as its C version answers with
 * the server's backends. False (nothing done) when the call is not the one
 * this build's function answers (another column count).
 */
export function reportActivity(mod: PostgresModule, exports: WebAssembly.Exports, fcinfo: number, rows: readonly ActivityRow[]): boolean {
  const ex = exports as Record<string, Fn | WebAssembly.Global>
  const call = (name: string, ...args: number[]): number => (ex[name] as Fn)(...args)
  let view = new DataView(mod.HEAPU8.buffer)
  const rsinfo = view.getUint32(fcinfo + FCINFO_RESULTINFO, true)
  const expected = rsinfo === 0 ? 0 : view.getUint32(rsinfo + RSINFO_EXPECTED, true)
  if (expected === 0 || view.getInt32(expected, true) !== COLUMNS) return false
  const only = view.getInt16(fcinfo + FCINFO_NARGS, true) > 0 && view.getUint8(fcinfo + FCINFO_ARGS + 4) === 0 ? view.getInt32(fcinfo + FCINFO_ARGS, true) : undefined
  call('InitMaterializedSRF', fcinfo, 0)
  view = new DataView(mod.HEAPU8.buffer)
  const store = view.getUint32(rsinfo + RSINFO_RESULT, true)
  const desc = view.getUint32(rsinfo + RSINFO_DESC, true)
  const database = view.getUint32((ex.MyDatabaseId as WebAssembly.Global).value as number, true)
  // Every client runs as the engine session's user (the superuser, or a server's locked role).
  const user = call('GetSessionUserId')
  // Palloc'd in the call's memory context: Postgres frees it with the query.
  const values = call('palloc0', COLUMNS * 4)
  const nulls = call('palloc0', COLUMNS)
  const text = (s: string): number => {
    const sp = mod.stackSave()
    try {
      return call('cstring_to_text', mod.stringToUTF8OnStack(s))
    } finally {
      mod.stackRestore(sp)
    }
  }
  const timestamp = (ms: number): number =>
    (ex.Int64GetDatum as unknown as (v: bigint) => number)(BigInt(Math.round((ms - POSTGRES_EPOCH_MS) * 1000)))
  const inet = (address: string): number => {
    // A FunctionCallInfo of one argument for inet_in.
    const info = call('palloc0', FCINFO_ARGS + 8)
    const sp = mod.stackSave()
    try {
      const v = new DataView(mod.HEAPU8.buffer)
      v.setInt16(info + FCINFO_NARGS, 1, true)
      v.setUint32(info + FCINFO_ARGS, mod.stringToUTF8OnStack(address), true)
      return call('inet_in', info)
    } finally {
      mod.stackRestore(sp)
    }
  }
  for (const row of rows) {
    if (only !== undefined && row.pid !== only) continue
    const set = new Map<Col, number>([
      [Col.Datid, database],
      [Col.Pid, row.pid],
      [Col.Usesysid, user],
      [Col.ApplicationName, text(row.applicationName)],
      [Col.State, text(row.state)],
      [Col.Query, text(clip(row.query))],
      [Col.BackendStart, timestamp(row.backendStart)],
      [Col.BackendType, text('client backend')],
      [Col.Ssl, 0],
      [Col.GssAuth, 0],
      [Col.GssEnc, 0],
      [Col.GssDelegation, 0],
    ])
    if (row.waitEventType !== undefined) set.set(Col.WaitEventType, text(row.waitEventType))
    if (row.waitEvent !== undefined) set.set(Col.WaitEvent, text(row.waitEvent))
    if (row.xactStart !== undefined) set.set(Col.XactStart, timestamp(row.xactStart))
    if (row.queryStart !== undefined) set.set(Col.QueryStart, timestamp(row.queryStart))
    if (row.stateChange !== undefined) set.set(Col.StateChange, timestamp(row.stateChange))
    if (row.clientAddr !== undefined) set.set(Col.ClientAddr, inet(row.clientAddr))
    if (row.clientPort !== undefined) set.set(Col.ClientPort, row.clientPort)
    const v = new DataView(mod.HEAPU8.buffer)
    for (let col = 0; col < COLUMNS; col++) {
      const value = set.get(col)
      v.setUint32(values + col * 4, value ?? 0, true)
      v.setUint8(nulls + col, value === undefined ? 1 : 0)
    }
    call('tuplestore_putvalues', store, desc, values, nulls)
  }
  return true
}

/** The first {@link QUERY_BYTES} bytes of `query`, cut at a character. */
function clip(query: string): string {
  const bytes = new TextEncoder().encode(query)
  if (bytes.length < QUERY_BYTES) return query
  let end = QUERY_BYTES - 1
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
  return new TextDecoder().decode(bytes.subarray(0, end))
}
