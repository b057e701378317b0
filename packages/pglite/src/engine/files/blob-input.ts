import { nodeBuiltinIfAny } from '../node-builtin.js'

/** What `/dev/blob` reads during one call. */
export interface BlobInput {
  readonly size: number
  /** Copies up to `length` bytes from `position` into `into` at `offset`; returns how many (0 past the end). */
  read(into: Uint8Array, offset: number, length: number, position: number): number
  close(): void
}

/** A Blob read into memory whole: the way everywhere streaming is not (a browser, a small Blob). */
export function wholeInput(bytes: Uint8Array): BlobInput {
  return {
    size: bytes.byteLength,
    read(into, offset, length, position) {
      const n = Math.max(0, Math.min(length, bytes.byteLength - position))
      into.set(bytes.subarray(position, position + n), offset)
      return n
    },
    close() {},
  }
}

/** Smaller Blobs are read whole: a worker's first start costs more than copying them. */
export const STREAM_FROM = 16 * 1024 * 1024
/** Chunks the reader thread may post ahead of the engine. */
const AHEAD = 4
/** A read waits this long for the next chunk before it fails (EIO). */
const STALL_MS = 30_000

// Slots of the shared counters.
const SENT = 0
const TAKEN = 1
const STOPPED = 2

/**
 * The reader thread: reads each Blob it is given as a stream and posts the
 * chunks (transferred, not copied) on the Blob's own port, at most
 * {@link AHEAD} ahead of the engine. A message `{ from, gen }` starts over
 * at byte `from` (a seek); `{ stop: true }` ends the Blob. Plain JS: it runs
 * as the worker's eval'd source.
 */
const READER_SOURCE = `
const { parentPort } = require('node:worker_threads')
parentPort.on('message', ({ blob, port, shared }) => {
  const counts = new Int32Array(shared)
  let current = null
  const send = (message, transfer) => {
    port.postMessage(message, transfer)
    Atomics.add(counts, ${SENT}, 1)
    Atomics.notify(counts, ${SENT})
  }
  const pump = async (from, gen) => {
    const reader = blob.slice(from).stream().getReader()
    current = reader
    try {
      for (;;) {
        for (;;) {
          const taken = Atomics.load(counts, ${TAKEN})
          if (current !== reader || Atomics.load(counts, ${STOPPED})) return
          if (Atomics.load(counts, ${SENT}) - taken < ${AHEAD}) break
          const wait = Atomics.waitAsync(counts, ${TAKEN}, taken)
          if (wait.async) await wait.value
        }
        const { done, value } = await reader.read()
        if (current !== reader) return
        if (done) return send({ gen, done: true })
        const own = value.byteOffset === 0 && value.byteLength === value.buffer.byteLength ? value : value.slice()
        send({ gen, chunk: own }, [own.buffer])
      }
    } catch (error) {
      if (current === reader) send({ gen, error: String(error && error.message || error) })
    }
  }
  port.on('message', (message) => {
    const previous = current
    current = null
    if (previous) previous.cancel().catch(() => {})
    if (message.stop) port.close()
    else pump(message.from, message.gen)
  })
  pump(0, 0)
})
`

type WorkerThreads = typeof import('node:worker_threads')
type ReaderThread = import('node:worker_threads').Worker

let reader: ReaderThread | undefined

/** The process's reader thread, started on first use; it never keeps the process alive. */
function readerThread(threads: WorkerThreads): ReaderThread {
  if (reader) return reader
  const started = new threads.Worker(READER_SOURCE, { eval: true, name: 'pgwasm blob reader' })
  started.unref()
  const forget = () => {
    if (reader === started) reader = undefined
  }
  started.on('error', forget)
  started.on('exit', forget)
  return (reader = started)
}

type ReaderMessage = { gen: number; chunk?: Uint8Array; done?: true; error?: string }

/** A read that cannot be served; `/dev/blob` turns it into EIO. */
export class BlobReadError extends Error {}

/**
 * A Blob that `/dev/blob` reads as the engine asks for it, from a thread
 * that streams it, instead of a copy of all of it made first. The engine
 * runs synchronously, so a read blocks (`Atomics.wait`) until its chunk is
 * posted; the next chunks are read meanwhile. Reading 1 GB whole cost
 * 0.7 s and 1 GB of fresh memory before COPY began. A read that goes back
 * (a second COPY of the same Blob in one call, a seek) starts the stream
 * over at its offset. Undefined where this cannot run (outside Node, a
 * Blob under {@link STREAM_FROM}, a file-backed Blob): read the Blob whole
 * there.
 */
export function streamedInput(blob: Blob): BlobInput | undefined {
  if (blob.size < STREAM_FROM) return undefined
  const threads = nodeBuiltinIfAny<WorkerThreads>('node:worker_threads')
  if (!threads) return undefined
  let thread: ReaderThread
  try {
    thread = readerThread(threads)
  } catch {
    return undefined
  }
  const counts = new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT))
  const { port1: port, port2 } = new threads.MessageChannel()
  try {
    thread.postMessage({ blob, port: port2, shared: counts.buffer }, [port2])
  } catch {
    // A file-backed Blob (fs.openAsBlob) cannot go to another thread.
    port.close()
    return undefined
  }

  let gen = 0
  /** The chunk being read and the offset of its first byte. */
  let chunk: Uint8Array | undefined
  let chunkStart = 0
  /** Offset of the next chunk the stream will deliver. */
  let streamAt = 0
  let ended = false
  let closed = false

  const take = (): ReaderMessage => {
    const deadline = performance.now() + STALL_MS
    for (;;) {
      const sent = Atomics.load(counts, SENT)
      const received = threads.receiveMessageOnPort(port)
      if (received) {
        Atomics.add(counts, TAKEN, 1)
        Atomics.notify(counts, TAKEN)
        return received.message as ReaderMessage
      }
      const left = deadline - performance.now()
      if (left <= 0) throw new BlobReadError(`no data from the Blob for ${STALL_MS / 1000} s`)
      Atomics.wait(counts, SENT, sent, Math.min(left, 1000))
    }
  }

  /** Moves to the chunk holding `position`, or returns false at the end of the Blob. */
  const reach = (position: number): boolean => {
    if (chunk && position >= chunkStart && position < chunkStart + chunk.byteLength) return true
    if (position < (chunk ? chunkStart : streamAt)) {
      // Behind what was streamed: start over there.
      gen++
      port.postMessage({ from: position, gen })
      chunk = undefined
      streamAt = chunkStart = position
      ended = false
    }
    while (!ended) {
      const message = take()
      if (message.gen !== gen) continue
      if (message.error !== undefined) throw new BlobReadError(`reading the Blob failed: ${message.error}`)
      if (message.done) {
        ended = true
        chunk = undefined
        break
      }
      chunk = message.chunk!
      chunkStart = streamAt
      streamAt += chunk.byteLength
      if (position < streamAt) return true
    }
    return false
  }

  return {
    size: blob.size,
    read(into, offset, length, position) {
      if (closed) throw new BlobReadError('the Blob of this call is no longer readable')
      let done = 0
      while (done < length && position + done < blob.size && reach(position + done)) {
        const from = position + done - chunkStart
        const n = Math.min(length - done, chunk!.byteLength - from)
        into.set(chunk!.subarray(from, from + n), offset + done)
        done += n
      }
      return done
    },
    close() {
      if (closed) return
      closed = true
      Atomics.store(counts, STOPPED, 1)
      Atomics.notify(counts, TAKEN)
      port.postMessage({ stop: true })
      port.close()
      chunk = undefined
    },
  }
}
