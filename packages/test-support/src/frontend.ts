/**
 * Frontend (client to server) messages of the PostgreSQL wire protocol, built
 * by hand: what the raw-wire tests send, right or deliberately wrong. Each
 * whole message is a Buffer with a buffer of its own (never a slice of
 * Node's pool), so code that hands its buffer on sees exactly the message.
 */

const utf8 = new TextEncoder()

export function int32(n: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(n >>> 0)
  return b
}

/** A frame: type byte, int32 length, body (a string body is its UTF-8, no NUL added). */
export function frame(type: string | number, body: Uint8Array | string = new Uint8Array(0)): Buffer {
  const t = typeof type === 'string' ? type.charCodeAt(0) : type
  const bytes = typeof body === 'string' ? utf8.encode(body) : body
  const out = Buffer.alloc(5 + bytes.length)
  out[0] = t
  out.writeUInt32BE(4 + bytes.length, 1)
  out.set(bytes, 5)
  return out
}

/** The values as NUL-terminated strings, back to back. */
export function cstr(...values: string[]): Buffer {
  return Buffer.from(utf8.encode(values.map((v) => `${v}\u0000`).join('')))
}

/** A protocol 3.0 startup packet. */
export function startupPacket(params: Record<string, string> = { user: 'postgres', database: 'postgres' }): Buffer {
  const body = Buffer.concat([
    int32(196608),
    ...Object.entries(params).map(([k, v]) => cstr(k, v)),
    Buffer.from([0]),
  ])
  return Buffer.concat([int32(4 + body.length), body])
}

/** A simple Query: the SQL, NUL-terminated (bytes: as a client in another encoding sends them). */
export function queryFrame(sql: string | Uint8Array): Buffer {
  return frame('Q', typeof sql === 'string' ? cstr(sql) : Buffer.concat([sql, Buffer.from([0])]))
}

/** Parse of `sql` into statement `name`, no parameter types given. */
export function parseFrame(sql: string, name = ''): Buffer {
  return frame('P', Buffer.concat([cstr(name, sql), Buffer.from([0, 0])]))
}

/** Bind of `statement` into `portal` with text parameters (null for SQL NULL) and text results. */
export function bindFrame(values: (string | null)[] = [], statement = '', portal = ''): Buffer {
  const params = values.map((v) => (v === null ? int32(-1) : Buffer.concat([int32(Buffer.byteLength(v)), Buffer.from(v)])))
  return frame('B', Buffer.concat([cstr(portal, statement), Buffer.from([0, 0]), Buffer.from([values.length >> 8, values.length & 255]), ...params, Buffer.from([0, 0])]))
}

/** Describe of a statement ('S') or a portal ('P'). */
export function describeFrame(kind: 'S' | 'P', name = ''): Buffer {
  return frame('D', Buffer.concat([Buffer.from(kind), cstr(name)]))
}

/** Execute of `portal`, at most `rows` rows (0: all). */
export function executeFrame(portal = '', rows = 0): Buffer {
  return frame('E', Buffer.concat([cstr(portal), int32(rows)]))
}

export const SYNC = frame('S')

export function copyData(data: string | Uint8Array): Buffer {
  return frame('d', typeof data === 'string' ? Buffer.from(data) : data)
}

export function copyDone(): Buffer {
  return frame('c')
}

export function copyFail(reason: string): Buffer {
  return frame('f', cstr(reason))
}
