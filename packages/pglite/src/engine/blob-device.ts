import type { FsStream, PostgresModule } from './emscripten.js'

/**
 * `/dev/blob`: the file `COPY ... FROM '/dev/blob'` reads the caller's Blob
 * from and `COPY ... TO '/dev/blob'` writes the result Blob to (docs/engine.md).
 */
export interface BlobDevice {
  setInput(bytes: Uint8Array | undefined): void
  /** The chunks written since the last call, or undefined if none. */
  takeOutput(): Uint8Array[] | undefined
}

const EINVAL = 28

export function registerBlobDevice(mod: PostgresModule): BlobDevice {
  let input: Uint8Array | undefined
  let output: Uint8Array[] | undefined
  const fs = mod.FS
  const dev = fs.makedev(64, 0)
  fs.registerDevice(dev, {
    open() {},
    close() {},
    read(_stream: FsStream, buffer: Uint8Array, offset: number, length: number, position: number): number {
      if (!input) return 0
      const n = Math.max(0, Math.min(length, input.byteLength - position))
      buffer.set(input.subarray(position, position + n), offset)
      return n
    },
    write(_stream: FsStream, buffer: Uint8Array, offset: number, length: number): number {
      ;(output ??= []).push(buffer.slice(offset, offset + length))
      return length
    },
    llseek(stream: FsStream, offset: number, whence: number): number {
      let position = offset
      if (whence === 1) position += stream.position
      else if (whence === 2) position += input?.byteLength ?? 0
      if (position < 0) throw new fs.ErrnoError(EINVAL)
      return position
    },
  })
  fs.mkdev('/dev/blob', dev)
  return {
    setInput(bytes) {
      input = bytes
    },
    takeOutput() {
      const out = output
      output = undefined
      return out
    },
  }
}
