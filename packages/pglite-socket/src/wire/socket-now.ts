import { readSync } from 'node:fs'
import { Socket } from 'node:net'

const probe = Buffer.allocUnsafe(64 * 1024)

/** Read by {@link readNow}: the peer closed its side (end of stream, or a reset). */
export const PEER_LEFT = -1

/** The socket's descriptor, or undefined where it has none to read (Windows). */
export function socketFd(socket: Socket): number | undefined {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd
  return typeof fd === 'number' && fd >= 0 ? fd : undefined
}

/**
 * Reads what the kernel holds for `socket` now into `into`, while the
 * engine holds this thread (no socket event can come then).
 * @returns the bytes read, 0 when there are none yet, or {@link PEER_LEFT}.
 */
export function readNow(fd: number, into: Uint8Array): number {
  let read: number
  try {
    read = readSync(fd, into, 0, into.length, null)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    // Nothing to read: the client is there and quiet.
    return code === 'EAGAIN' || code === 'EWOULDBLOCK' ? 0 : PEER_LEFT
  }
  return read === 0 ? PEER_LEFT : read
}

/**
 * Whether the peer of `socket` has closed its side, read at once from the
 * socket (see {@link readNow}). Bytes found instead are the client's next
 * messages; they go to `early`, in order, before anything the socket reads
 * later. False where the socket has no descriptor to read (Windows).
 */
export function peerLeft(socket: Socket, early: (bytes: Uint8Array) => void): boolean {
  const fd = socketFd(socket)
  if (fd === undefined) return socket.destroyed
  const read = readNow(fd, probe)
  if (read === PEER_LEFT) return true
  if (read > 0) early(Buffer.from(probe.subarray(0, read)))
  return false
}

/**
 * Whether the client of `socket` (an accepted connection) may be a socket
 * of this very thread: its writes then wait for this thread's event loop,
 * so reading it synchronously would wait for bytes that cannot come until
 * the read gives up. A TCP client is one when a client socket here has the
 * peer's port as its own; a Unix-socket client cannot be told apart, so any
 * client pipe here counts. True where the runtime cannot list its sockets.
 */
export function peerMayBeInProcess(socket: Socket): boolean {
  const list = (process as unknown as { _getActiveHandles?: () => unknown[] })._getActiveHandles
  if (typeof list !== 'function') return true
  const port = socket.remotePort
  for (const handle of list.call(process)) {
    if (!(handle instanceof Socket) || (handle as { server?: unknown }).server) continue
    if (handle === process.stdin || handle === process.stdout || handle === process.stderr) continue
    if (port === undefined ? handle.remotePort === undefined : handle.localPort === port) return true
  }
  return false
}
