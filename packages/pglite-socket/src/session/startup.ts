import { reportAll, type ReportedSettings } from '../pooler/reported-settings.js'
import { StartupCode, authenticationOk, backendKeyData, concat, readInt32, readStartupParams, readyForQuery } from '../wire/wire.js'

/**
 * What a client gets once it is in: AuthenticationOk, a ParameterStatus for
 * each reported setting (reported-settings.ts), its cancel key, and
 * ReadyForQuery.
 */
export function startupReply(reported: ReportedSettings, processId: number, secret: number): Uint8Array {
  return concat([authenticationOk(), ...reportAll(reported), backendKeyData(processId, secret), readyForQuery('I')])
}

/** A StartupMessage: who logs in, to which database. */
export type StartupParams = Extract<StartupRequest, { kind: 'startup' }>

/** What a client's first packet asks for. */
export type StartupRequest =
  | { readonly kind: 'encryption' }
  | { readonly kind: 'cancel'; readonly processId: number; readonly secret: number }
  | { readonly kind: 'unsupported'; readonly version: string }
  /** A packet Postgres refuses before it looks at who logs in (08P01, or 53300 for a replication connection). */
  | { readonly kind: 'refused'; readonly code: string; readonly message: string }
  | {
      readonly kind: 'startup'
      readonly user: string
      readonly database: string
      readonly applicationName: string
      /** Every parameter of the packet (settings among them). */
      readonly params: ReadonlyMap<string, string>
    }

/** Reads a startup-phase packet (SSLRequest, GSSENCRequest, CancelRequest or StartupMessage). */
export function readStartupRequest(packet: Uint8Array): StartupRequest {
  const code = readInt32(packet, 4)
  if (code === StartupCode.SSL || code === StartupCode.GSSENC) return { kind: 'encryption' }
  if (code === StartupCode.Cancel) return { kind: 'cancel', processId: readInt32(packet, 8), secret: readInt32(packet, 12) }
  if (code !== StartupCode.Protocol3) return { kind: 'unsupported', version: `${code >>> 16}.${code & 0xffff}` }
  const params = readStartupParams(packet)
  if (!params) return { kind: 'refused', code: '08P01', message: 'invalid startup packet layout: expected terminator as last byte' }
  // A physical or logical replication connection asks for a WAL sender, which this server has none of (libpq's "true", "on", "yes", "1" or "database").
  if (/^(true|on|yes|1|database)$/i.test(params.get('replication') ?? 'false')) {
    return { kind: 'refused', code: '53300', message: 'number of requested standby connections exceeds max_wal_senders (currently 0)' }
  }
  return startupFromParams(params)
}

/** The user, database and application name a StartupMessage's parameters name (the database defaults to the user's name). */
export function startupFromParams(params: ReadonlyMap<string, string>): StartupParams {
  const user = params.get('user') ?? 'postgres'
  return { kind: 'startup', user, database: params.get('database') || user, applicationName: params.get('application_name') ?? '', params }
}
