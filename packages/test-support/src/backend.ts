/** Backend (server to client) messages of the PostgreSQL wire protocol, as the raw-wire tests read them. */

export interface BackendMessage {
  type: string
  body: Buffer
}

/** Fields of an ErrorResponse / NoticeResponse body by their code letter. */
export function errorFields(body: Buffer): Record<string, string> {
  const fields: Record<string, string> = {}
  let at = 0
  while (at < body.length && body[at] !== 0) {
    const code = String.fromCharCode(body[at]!)
    const end = body.indexOf(0, at + 1)
    if (end < 0) throw new Error(`unterminated field ${code} in ${body.toString('hex')}`)
    fields[code] = body.subarray(at + 1, end).toString('utf8')
    at = end + 1
  }
  return fields
}

/** The type letters of the frames in a reply, in order. */
export function frameTypes(bytes: Uint8Array): string {
  let types = ''
  for (let i = 0; i < bytes.length; ) {
    types += String.fromCharCode(bytes[i]!)
    i += 1 + new DataView(bytes.buffer, bytes.byteOffset + i + 1, 4).getInt32(0)
  }
  return types
}
