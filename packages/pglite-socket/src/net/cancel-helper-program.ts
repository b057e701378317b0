import type { passwordExchange } from '../session/password-exchange.js'

/**
 * The program of the cancel helper process (cancel-helper.ts). It is sent to
 * `node -e` as the text of {@link cancelHelperProgram}, so it imports
 * nothing and reaches Node's modules through `process.getBuiltinModule`.
 *
 * It accepts on the listening sockets the server shares with it. A
 * CancelRequest is written to the board, a file the server reads while the
 * engine runs a statement, and is also sent as a message for when the
 * server is free again. Any other connection goes back to the server with
 * the bytes read from it; but while the server's thread runs a statement
 * (its heartbeat on the board is fresh), a client the server's door card
 * lets in (a known database, a role that may log in) is started here: it
 * proves its password if the server has one (through the server's own
 * `passwordExchange`, passed in as text), gets its AuthenticationOk,
 * settings, cancel key and ReadyForQuery at once, and goes to the server,
 * which takes it over when the statement ends (a setting told wrong is
 * reported again then). A wrong password is reported to the server, which
 * counts it for its throttle and closes the door to password logins while
 * its throttle holds any failure.
 */
export function cancelHelperProgram(boardPath: string, slots: number, exchange: typeof passwordExchange): void {
  // Not `require`: a bundler turns it into a helper the sent text does not carry.
  const fs = process.getBuiltinModule('node:fs')
  const crypto = process.getBuiltinModule('node:crypto')
  type Server = import('node:net').Server
  type Socket = import('node:net').Socket
  const CANCEL_CODE = 80877102
  const SSL_CODE = 80877103
  const GSSENC_CODE = 80877104
  const PROTOCOL_3 = 196608
  /** The heartbeat (f64, ms since the epoch) and the door card (u32 length, JSON) follow the slots. */
  const HEARTBEAT_AT = 4 + slots * 12
  const CARD_AT = HEARTBEAT_AT + 8
  /** The server's thread counts as busy while its heartbeat (written every ~10 ms of a running statement) is this fresh. */
  const BUSY_FRESH_MS = 200
  /** A connection that has sent less than a packet's length and code by then goes to the server anyway. */
  const HEAD_WAIT_MS = 1000
  /** A password exchange not finished by then ends the connection (the server's own limit is its authTimeoutMs). */
  const AUTH_WAIT_MS = 10_000
  /** After a wrong password, password logins wait for the server this long (its throttle spaces out the guesses). */
  const AFTER_FAILURE_MS = 60_000
  /** How often the helper checks that the server's process is still its parent. */
  const PARENT_CHECK_MS = 100
  const board = fs.openSync(boardPath, 'r+')
  const servers = new Map<string, Server>()
  /** The password each server asks for, by key (none: no password). */
  const passwords = new Map<string, { method: 'scram-sha-256' | 'md5' | 'password'; password: string }>()
  /** Until when password logins go to the server, by key. */
  const closedUntil = new Map<string, number>()
  let seq = 0
  const send = (message: object, handle?: Socket): void => {
    if (process.connected) process.send!(message, handle as never, { keepOpen: false }, () => {})
  }

  function record(pid: number, secret: number): number {
    seq = (seq + 1) >>> 0
    const slot = Buffer.alloc(12)
    slot.writeUInt32BE(seq, 0)
    slot.writeUInt32BE(pid >>> 0, 4)
    slot.writeUInt32BE(secret >>> 0, 8)
    fs.writeSync(board, slot, 0, 12, 4 + (seq % slots) * 12)
    const head = Buffer.alloc(4)
    head.writeUInt32BE(seq, 0)
    // The count last: a reader that sees it finds its slot written.
    fs.writeSync(board, head, 0, 4, 0)
    return seq
  }

  const chunk = Buffer.alloc(64 * 1024)

  type Card = {
    room: number
    keys: [number, number][]
    databases: Record<string, { reported: [string, string][]; logins: string[] }>
  }
  /**
   * Keys given out (`server:pid`), never twice. A key stays on the card until
   * the server has taken its client over, so the used ones on a card are the
   * clients started here that the server's `room` does not count yet.
   */
  const used = new Set<string>()

  /** The door card of server `key`, when the server's thread is busy now; undefined: hand the connection over. */
  function busyCard(key: string): Card | undefined {
    const at = Buffer.alloc(12)
    if (fs.readSync(board, at, 0, 12, HEARTBEAT_AT) < 12) return undefined
    const beat = at.readDoubleBE(0)
    if (!(Date.now() - beat < BUSY_FRESH_MS)) return undefined
    const length = at.readUInt32BE(8)
    if (length === 0 || length > 1 << 20) return undefined
    const text = Buffer.alloc(length)
    if (fs.readSync(board, text, 0, length, CARD_AT + 4) < length) return undefined
    try {
      // A card being rewritten as it is read does not parse: the connection is handed over.
      const cards = JSON.parse(text.toString('utf8')) as Record<string, Card>
      return cards[key]
    } catch {
      return undefined
    }
  }

  function frame(type: string, body: Buffer): Buffer {
    const head = Buffer.alloc(5)
    head.write(type, 0, 'latin1')
    head.writeInt32BE(body.length + 4, 1)
    return Buffer.concat([head, body])
  }

  function int32s(...values: number[]): Buffer {
    const out = Buffer.alloc(values.length * 4)
    values.forEach((v, i) => out.writeInt32BE(v | 0, i * 4))
    return out
  }

  function cstrings(...values: string[]): Buffer {
    return Buffer.concat(values.map((v) => Buffer.from(`${v}\0`, 'utf8')))
  }

  function startupParams(packet: Buffer): Map<string, string> | undefined {
    const params = new Map<string, string>()
    let at = 8
    for (;;) {
      const end = packet.indexOf(0, at)
      if (end < 0) return undefined
      // The terminator must be the packet's last byte, as Postgres requires (anything else goes to the server, which refuses it).
      if (end === at) return end === packet.length - 1 ? params : undefined
      const name = packet.toString('utf8', at, end)
      const valueEnd = packet.indexOf(0, end + 1)
      if (valueEnd < 0) return undefined
      params.set(name, packet.toString('utf8', end + 1, valueEnd))
      at = valueEnd + 1
    }
  }

  /**
   * Starts a client whose startup packet is `packet` while the server is
   * busy, and sends it to the server; false when the card does not let it
   * in here (the caller hands it over as it came).
   */
  function startHere(key: string, socket: Socket, fd: number, packet: Buffer, rest: Buffer): boolean {
    const card = busyCard(key)
    const params = startupParams(packet)
    if (!card || !params || params.has('replication')) return false
    const user = params.get('user') ?? 'postgres'
    const database = params.get('database') || user
    const facts = card.databases[database] ?? card.databases['*']
    if (!facts || !facts.logins.includes(user)) return false
    const pair = freeKey(key, card)
    if (!pair) return false
    const password = passwords.get(key)
    if (password && (closedUntil.get(key) ?? 0) > Date.now()) return false
    // Its key is taken now: no other client gets it while this one proves its password.
    used.add(`${key}:${pair[0]}`)
    const started = (after: Buffer): void => admit(key, socket, fd, params, facts, pair, after)
    if (!password) started(rest)
    else authenticate(key, socket, fd, exchange(crypto, password.method, password.password, user), user, pair, rest, started)
    return true
  }

  function freeKey(key: string, card: Card): [number, number] | undefined {
    const free = card.keys.filter(([pid]) => !used.has(`${key}:${pid}`))
    if (free.length === 0 || card.keys.length - free.length >= card.room) return undefined
    return free[0]
  }

  /** Sends a logged-in client its startup reply, then hands it to the server with what it sent since (`after`). */
  function admit(key: string, socket: Socket, fd: number, params: Map<string, string>, facts: Card['databases'][string], pair: [number, number], after: Buffer): void {
    const told = new Map(facts.reported)
    if (told.has('application_name')) told.set('application_name', params.get('application_name') ?? '')
    const encoding = params.get('client_encoding')
    if (encoding !== undefined) told.set('client_encoding', /^(utf-?8|unicode)$/i.test(encoding) ? 'UTF8' : encoding.toUpperCase())
    const reply = Buffer.concat([
      frame('R', int32s(0)),
      ...[...told].map(([name, value]) => frame('S', cstrings(name, value))),
      frame('K', int32s(pair[0], pair[1])),
      frame('Z', Buffer.from('I')),
    ])
    try {
      fs.writeSync(fd, reply)
    } catch {
      socket.destroy()
      return
    }
    if (!socket.destroyed) {
      send(
        { type: 'started', key, head: after.toString('base64'), processId: pair[0], secret: pair[1], params: [...params], told: [...told] },
        socket,
      )
    }
  }

  /**
   * Runs the password exchange on the connection's descriptor (read as
   * {@link take} reads it), then `started` with what the client sent after
   * it; a wrong password gets PostgreSQL's FATAL, and the server hears of
   * it (its throttle counts it, and it drops the key).
   */
  function authenticate(
    key: string,
    socket: Socket,
    fd: number,
    auth: ReturnType<typeof passwordExchange>,
    user: string,
    pair: [number, number],
    pending: Buffer,
    started: (after: Buffer) => void,
  ): void {
    const deadline = Date.now() + AUTH_WAIT_MS
    const failed = (code: string, message: string, wrongPassword: boolean): void => {
      try {
        fs.writeSync(fd, frame('E', Buffer.concat([cstrings('SFATAL', 'VFATAL', `C${code}`, `M${message}`), Buffer.alloc(1)])))
      } catch {}
      socket.destroy()
      if (wrongPassword) closedUntil.set(key, Date.now() + AFTER_FAILURE_MS)
      send({ type: 'authFailed', key, processId: pair[0], address: wrongPassword ? (socket.remoteAddress ?? '') : undefined })
    }
    try {
      fs.writeSync(fd, auth.begin())
    } catch {
      return failed('08006', 'could not send data to client', false)
    }
    let buffered = pending
    const step = (): void => {
      if (socket.destroyed) return failed('08006', 'connection closed during authentication', false)
      let read = -1
      try {
        read = fs.readSync(fd, chunk, 0, chunk.length, null)
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code
        if (code !== 'EAGAIN' && code !== 'EWOULDBLOCK') return failed('08006', 'connection lost during authentication', false)
      }
      if (read === 0) return failed('08006', 'connection closed during authentication', false)
      if (read > 0) buffered = Buffer.concat([buffered, chunk.subarray(0, read)])
      while (buffered.length >= 5) {
        const length = buffered.readInt32BE(1)
        if (buffered[0] !== 0x70 /* p */ || length < 4 || length > 10_000) {
          return failed('08P01', `expected a password message, got type 0x${buffered[0]!.toString(16)}`, false)
        }
        if (buffered.length < 1 + length) break
        const result = auth.step(buffered.subarray(5, 1 + length))
        buffered = buffered.subarray(1 + length)
        try {
          if (result.reply) fs.writeSync(fd, result.reply)
        } catch {
          return failed('08006', 'could not send data to client', false)
        }
        if (!result.done) continue
        if (!result.ok) return failed('28P01', `password authentication failed for user "${user}"`, true)
        return started(buffered)
      }
      if (Date.now() >= deadline) return failed('08006', 'authentication timed out', false)
      setTimeout(step, read > 0 ? 0 : 1)
    }
    step()
  }

  /**
   * Reads the connection's first bytes from its descriptor, never through
   * the stream: bytes a stream read past the first packet would be lost
   * when the socket moves to the server (`pauseOnConnect`: the stream does
   * not read at all).
   */
  function take(key: string, socket: Socket): void {
    const fd = (socket as unknown as { _handle?: { fd?: number } | null })._handle?.fd
    if (typeof fd !== 'number' || fd < 0) return handOff(key, socket, Buffer.alloc(0))
    socket.on('error', () => {})
    const deadline = Date.now() + HEAD_WAIT_MS
    let head = Buffer.alloc(0)
    const step = (): void => {
      if (socket.destroyed) return
      let read = -1
      try {
        read = fs.readSync(fd, chunk, 0, chunk.length, null)
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code
        if (code !== 'EAGAIN' && code !== 'EWOULDBLOCK') return void socket.destroy()
      }
      // Gone before a whole packet: nothing to hand on.
      if (read === 0) return void socket.destroy()
      if (read > 0) head = Buffer.concat([head, chunk.subarray(0, read)])
      const isCancel = head.length >= 8 && head.readInt32BE(0) === 16 && head.readInt32BE(4) === CANCEL_CODE
      if (head.length >= 8 && !isCancel) {
        const length = head.readInt32BE(0)
        const code = head.readInt32BE(4)
        if (length === 8 && (code === SSL_CODE || code === GSSENC_CODE) && busyCard(key)) {
          // No TLS or GSS on this server (as its own answer): the client goes on in the clear.
          try {
            fs.writeSync(fd, Buffer.from('N'))
          } catch {
            return void socket.destroy()
          }
          head = head.subarray(8)
          setTimeout(step, 0)
          return
        }
        if (code !== PROTOCOL_3 || length < 8 || length > 10_000) return handOff(key, socket, head)
        if (head.length >= length) {
          if (!startHere(key, socket, fd, head.subarray(0, length), head.subarray(length))) handOff(key, socket, head)
          return
        }
        // The rest of the startup packet is on its way.
        if (Date.now() >= deadline) return handOff(key, socket, head)
        setTimeout(step, read > 0 ? 0 : 1)
        return
      }
      if (isCancel && head.length >= 16) {
        const pid = head.readUInt32BE(8)
        const secret = head.readUInt32BE(12)
        send({ type: 'cancel', key, seq: record(pid, secret), pid, secret })
        // PostgreSQL answers a CancelRequest with nothing and closes.
        return void socket.destroy()
      }
      if (Date.now() >= deadline) return handOff(key, socket, head)
      setTimeout(step, read > 0 ? 0 : 1)
    }
    step()
  }

  function handOff(key: string, socket: Socket, head: Buffer): void {
    if (!socket.destroyed) send({ type: 'connection', key, head: head.toString('base64') }, socket)
  }

  process.on('message', (message: { type: string; key: string; auth?: { method: 'scram-sha-256' | 'md5' | 'password'; password: string } }, handle?: Server) => {
    if (message.type === 'serve' && handle) {
      servers.set(message.key, handle)
      if (message.auth) passwords.set(message.key, message.auth)
      ;(handle as Server & { pauseOnConnect: boolean }).pauseOnConnect = true
      handle.on('error', () => {})
      handle.on('connection', (socket: Socket) => take(message.key, socket))
      send({ type: 'serving', key: message.key })
    } else if (message.type === 'close') {
      servers.get(message.key)?.close()
      servers.delete(message.key)
      passwords.delete(message.key)
      // Not close()'s callback: that waits for the connections handed to the server to end.
      setImmediate(() => send({ type: 'closed', key: message.key }))
    }
  })
  // The server's process is gone: nothing is left to help. Exiting closes the
  // listening sockets and the connections held here, so the port is free at once.
  process.on('disconnect', () => process.exit(0))
  // 'disconnect' alone is not enough: with a connection's handle still on its
  // way to a server that died (killed while its thread ran a statement), Node
  // postpones the event for good. A parent that is gone shows as another ppid.
  const parent = process.ppid
  setInterval(() => {
    if (!process.connected || process.ppid !== parent) process.exit(0)
  }, PARENT_CHECK_MS).unref()
  // Ctrl-C in a terminal reaches the whole process group: the server decides whether to stop.
  process.on('SIGINT', () => {})
  send({ type: 'ready' })
}
