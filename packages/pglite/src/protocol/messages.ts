import { DatabaseError, type ServerFields } from '../errors.js'
import { cstringEnd, decodeText, readInt32 } from './text.js'

/** ErrorResponse/NoticeResponse field codes to names (protocol "Error and Notice Message Fields"). */
const FIELD_NAMES: Record<number, keyof ServerFields | 'message'> = {
  0x53: 'severity', // S (localized)
  0x43: 'code', // C
  0x4d: 'message', // M
  0x44: 'detail', // D
  0x48: 'hint', // H
  0x50: 'position', // P
  0x70: 'internalPosition', // p
  0x71: 'internalQuery', // q
  0x57: 'where', // W
  0x73: 'schema', // s
  0x74: 'table', // t
  0x63: 'column', // c
  0x64: 'dataType', // d
  0x6e: 'constraint', // n
  0x46: 'file', // F
  0x4c: 'line', // L
  0x52: 'routine', // R
}

export type NoticeFields = ServerFields & { message: string }

/** Reads the fields of an ErrorResponse or NoticeResponse body. */
export function readServerFields(buf: Uint8Array, start: number, end: number): NoticeFields {
  const fields: Record<string, string> = { message: '' }
  let i = start
  while (i < end && buf[i] !== 0) {
    const code = buf[i]!
    const stop = cstringEnd(buf, i + 1, end)
    const name = FIELD_NAMES[code]
    // V (non-localized severity) is preferred over S when both are present.
    if (code === 0x56) fields.severity = decodeText(buf, i + 1, stop)
    else if (name && !(name === 'severity' && fields.severity)) fields[name] = decodeText(buf, i + 1, stop)
    i = stop + 1
  }
  return fields as unknown as NoticeFields
}

export function readDatabaseError(buf: Uint8Array, start: number, end: number): DatabaseError {
  const { message, ...fields } = readServerFields(buf, start, end)
  return new DatabaseError(message, fields, end - start + 4)
}

export interface Notification {
  processId: number
  channel: string
  payload: string
}

export function readNotification(buf: Uint8Array, start: number, end: number): Notification {
  const processId = readInt32(buf, start)
  const channelEnd = cstringEnd(buf, start + 4, end)
  const payloadEnd = cstringEnd(buf, channelEnd + 1, end)
  return {
    processId,
    channel: decodeText(buf, start + 4, channelEnd),
    payload: decodeText(buf, channelEnd + 1, payloadEnd),
  }
}
