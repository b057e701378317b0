/**
 * Backend message classes, as `@electric-sql/pglite`'s `messages` namespace
 * names them: pg-protocol's classes (the objects `execProtocol` returns are
 * built from them), plus the authentication messages, which pg-protocol
 * builds as plain objects and PGlite as classes.
 */
export {
  parseComplete,
  bindComplete,
  closeComplete,
  noData,
  portalSuspended,
  replicationStart,
  emptyQuery,
  copyDone,
  DatabaseError,
  CopyDataMessage,
  CopyResponse,
  Field,
  RowDescriptionMessage,
  ParameterDescriptionMessage,
  ParameterStatusMessage,
  AuthenticationMD5Password,
  BackendKeyDataMessage,
  NotificationResponseMessage,
  ReadyForQueryMessage,
  CommandCompleteMessage,
  DataRowMessage,
  NoticeMessage,
} from 'pg-protocol/dist/messages.js'
export type { BackendMessage, MessageName } from 'pg-protocol/dist/messages.js'
import type { AuthenticationMD5Password } from 'pg-protocol/dist/messages.js'

/** AuthenticationOk (`R`, code 0). */
export class AuthenticationOk {
  readonly name = 'authenticationOk'
  constructor(readonly length: number) {}
}

/** AuthenticationCleartextPassword (`R`, code 3). */
export class AuthenticationCleartextPassword {
  readonly name = 'authenticationCleartextPassword'
  constructor(readonly length: number) {}
}

/** AuthenticationSASL (`R`, code 10): the mechanisms the server offers. */
export class AuthenticationSASL {
  readonly name = 'authenticationSASL'
  constructor(
    readonly length: number,
    readonly mechanisms: string[],
  ) {}
}

/** AuthenticationSASLContinue (`R`, code 11). */
export class AuthenticationSASLContinue {
  readonly name = 'authenticationSASLContinue'
  constructor(
    readonly length: number,
    readonly data: string,
  ) {}
}

/** AuthenticationSASLFinal (`R`, code 12). */
export class AuthenticationSASLFinal {
  readonly name = 'authenticationSASLFinal'
  constructor(
    readonly length: number,
    readonly data: string,
  ) {}
}

/** Any authentication request message. */
export type AuthenticationMessage =
  | AuthenticationOk
  | AuthenticationCleartextPassword
  | AuthenticationMD5Password
  | AuthenticationSASL
  | AuthenticationSASLContinue
  | AuthenticationSASLFinal
