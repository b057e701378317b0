import { readSync } from 'node:fs'
import type { Socket } from 'node:net'

const probe = Buffer.allocUnsafe(64 * 1024)

/**
 * Whether the peer of `socket` has closed its side, read at once from the
 * socket while the engine holds this thread (no socket event can come
 * then): end of stream, or a reset. Bytes found instead are the client's
 * next messages; they go to `early`, in order, before anything the socket
 * reads later. False where the socket has no descriptor to read (Windows).
 */
export function peerLeft(socket: Socket, early: (bytes: Uint8Array) => void): boolean {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd
  if (typeof fd !== 'number' || fd < 0) return socket.destroyed
  let read: number
  try {
    read = readSync(fd, probe, 0, probe.length, null)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    // Nothing to read: the client is there and quiet.
    return code !== 'EAGAIN' && code !== 'EWOULDBLOCK'
  }
  if (read === 0) return true
  early(Buffer.from(probe.subarray(0, read)))
  return false
}
