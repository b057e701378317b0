/** Backend message type bytes (PostgreSQL protocol, "Message Formats"). */
export enum Backend {
  Authentication = 0x52 /* R */,
  ParameterStatus = 0x53 /* S */,
  BackendKeyData = 0x4b /* K */,
  ReadyForQuery = 0x5a /* Z */,
  RowDescription = 0x54 /* T */,
  DataRow = 0x44 /* D */,
  CommandComplete = 0x43 /* C */,
  EmptyQueryResponse = 0x49 /* I */,
  ErrorResponse = 0x45 /* E */,
  NoticeResponse = 0x4e /* N */,
  NotificationResponse = 0x41 /* A */,
  ParseComplete = 0x31 /* 1 */,
  BindComplete = 0x32 /* 2 */,
  CloseComplete = 0x33 /* 3 */,
  NoData = 0x6e /* n */,
  PortalSuspended = 0x73 /* s */,
  ParameterDescription = 0x74 /* t */,
  CopyInResponse = 0x47 /* G */,
  CopyOutResponse = 0x48 /* H */,
  CopyBothResponse = 0x57 /* W */,
  CopyData = 0x64 /* d */,
  CopyDone = 0x63 /* c */,
}

/** Frontend message type bytes. */
export enum Frontend {
  Bind = 0x42 /* B */,
  Close = 0x43 /* C */,
  CopyData = 0x64 /* d */,
  CopyDone = 0x63 /* c */,
  CopyFail = 0x66 /* f */,
  Describe = 0x44 /* D */,
  Execute = 0x45 /* E */,
  Flush = 0x48 /* H */,
  FunctionCall = 0x46 /* F */,
  Parse = 0x50 /* P */,
  Password = 0x70 /* p */,
  Query = 0x51 /* Q */,
  Sync = 0x53 /* S */,
  Terminate = 0x58 /* X */,
}

/** The transaction status byte of a ReadyForQuery. */
export enum TxStatus {
  /** Not in a transaction block. */
  Idle = 0x49 /* I */,
  /** In a transaction block. */
  InBlock = 0x54 /* T */,
  /** In a failed transaction block: statements are refused until it ends. */
  Failed = 0x45 /* E */,
}

/**
 * Frontend type bytes a raw exec may carry. Others make Postgres exit:
 * unknown types and a password message after startup are FATAL, and a
 * Terminate ends the backend (a lone Terminate is answered without the engine).
 */
export const FRONTEND_TYPES: ReadonlySet<number> = new Set([
  Frontend.Bind,
  Frontend.Close,
  Frontend.CopyData,
  Frontend.CopyDone,
  Frontend.CopyFail,
  Frontend.Describe,
  Frontend.Execute,
  Frontend.Flush,
  Frontend.FunctionCall,
  Frontend.Parse,
  Frontend.Query,
  Frontend.Sync,
])
