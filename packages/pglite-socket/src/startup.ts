import { StartupCode, authenticationOk, backendKeyData, concat, parameterStatus, readInt32, readStartupParams, readyForQuery } from './wire.js'

export interface StartupIdentity {
  readonly user: string
  readonly applicationName: string
  readonly serverVersion: string
  readonly processId: number
  readonly secret: number
}

/**
 * What a client gets once it is in: AuthenticationOk, the ParameterStatus
 * values libpq and drivers read (the engine's session settings), its cancel
 * key, and ReadyForQuery.
 */
export function startupReply(who: StartupIdentity): Uint8Array {
  const status: [string, string][] = [
    ['application_name', who.applicationName],
    ['client_encoding', 'UTF8'],
    ['DateStyle', 'ISO, MDY'],
    ['default_transaction_read_only', 'off'],
    ['in_hot_standby', 'off'],
    ['integer_datetimes', 'on'],
    ['IntervalStyle', 'postgres'],
    ['is_superuser', 'on'],
    ['scram_iterations', '4096'],
    ['server_encoding', 'UTF8'],
    ['server_version', who.serverVersion],
    ['session_authorization', who.user],
    ['standard_conforming_strings', 'on'],
    ['TimeZone', 'UTC'],
  ]
  return concat([
    authenticationOk(),
    ...status.map(([k, v]) => parameterStatus(k, v)),
    backendKeyData(who.processId, who.secret),
    readyForQuery('I'),
  ])
}

/** What a client's first packet asks for. */
export type StartupRequest =
  | { readonly kind: 'encryption' }
  | { readonly kind: 'cancel'; readonly processId: number; readonly secret: number }
  | { readonly kind: 'unsupported'; readonly version: string }
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
  const user = params.get('user') ?? 'postgres'
  return { kind: 'startup', user, database: params.get('database') || user, applicationName: params.get('application_name') ?? '', params }
}
