/**
 * The program of the cancel helper process (cancel-helper.ts). It is sent to
 * `node -e` as the text of {@link cancelHelperProgram}, so it imports
 * nothing and reaches Node's modules through `process.getBuiltinModule`.
 *
 * It accepts on the listening sockets the server shares with it. A
 * CancelRequest is written to the board, a file the server reads while the
 * engine runs a statement, and is also sent as a message for when the
 * server is free again. Any other connection goes back to the server with
 * the bytes read from it.
 */
export function cancelHelperProgram(boardPath: string, slots: number): void {
  // Not `require`: a bundler turns it into a helper the sent text does not carry.
  const fs = process.getBuiltinModule('node:fs')
  type Server = import('node:net').Server
  type Socket = import('node:net').Socket
  const CANCEL_CODE = 80877102
  /** A connection that has sent less than a packet's length and code by then goes to the server anyway. */
  const HEAD_WAIT_MS = 1000
  const board = fs.openSync(boardPath, 'r+')
  const servers = new Map<string, Server>()
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
      if (head.length >= 8 && !isCancel) return handOff(key, socket, head)
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

  process.on('message', (message: { type: string; key: string }, handle?: Server) => {
    if (message.type === 'serve' && handle) {
      servers.set(message.key, handle)
      ;(handle as Server & { pauseOnConnect: boolean }).pauseOnConnect = true
      handle.on('error', () => {})
      handle.on('connection', (socket: Socket) => take(message.key, socket))
      send({ type: 'serving', key: message.key })
    } else if (message.type === 'close') {
      servers.get(message.key)?.close()
      servers.delete(message.key)
      // Not close()'s callback: that waits for the connections handed to the server to end.
      setImmediate(() => send({ type: 'closed', key: message.key }))
    }
  })
  // The server's process is gone: nothing is left to help.
  process.on('disconnect', () => process.exit(0))
  // Ctrl-C in a terminal reaches the whole process group: the server decides whether to stop.
  process.on('SIGINT', () => {})
  send({ type: 'ready' })
}
