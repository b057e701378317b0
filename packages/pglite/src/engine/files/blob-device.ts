import { BlobReadError, streamedInput, wholeInput, type BlobInput } from './blob-input.js'
import type { FsStream, PostgresModule } from '../emscripten.js'

/**
 * `/dev/blob`: the file `COPY ... FROM '/dev/blob'` reads the caller's Blob
 * from and `COPY ... TO '/dev/blob'` writes the result Blob to (docs/engine.md).
 */
export interface BlobDevice {
  /** Makes `blob` what `/dev/blob` reads until {@link clearInput}. */
  feed(blob: Blob): Promise<void>
  clearInput(): void
  /** The chunks written since the last call, or undefined if none. */
  takeOutput(): Uint8Array[] | undefined
}

const EINVAL = 28
const EIO = 29

export function registerBlobDevice(mod: PostgresModule): BlobDevice {
  let input: BlobInput | undefined
  let output: Uint8Array[] | undefined
  const fs = mod.FS
  const dev = fs.makedev(64, 0)
  fs.registerDevice(dev, {
    open() {},
    close() {},
    read(_stream: FsStream, buffer: Uint8Array, offset: number, length: number, position: number): number {
      if (!input) return 0
      try {
        return input.read(buffer, offset, length, position)
      } catch (error) {
        if (error instanceof BlobReadError) throw new fs.ErrnoError(EIO)
        throw error
      }
    },
    write(_stream: FsStream, buffer: Uint8Array, offset: number, length: number): number {
      ;(output ??= []).push(buffer.slice(offset, offset + length))
      return length
    },
    llseek(stream: FsStream, offset: number, whence: number): number {
      let position = offset
      if (whence === 1) position += stream.position
      else if (whence === 2) position += input?.size ?? 0
      if (position < 0) throw new fs.ErrnoError(EINVAL)
      return position
    },
  })
  fs.mkdev('/dev/blob', dev)
  const clearInput = (): void => {
    input?.close()
    input = undefined
  }
  return {
    async feed(blob) {
      clearInput()
      input = streamedInput(blob) ?? wholeInput(new Uint8Array(await blob.arrayBuffer()))
    },
    clearInput,
    takeOutput() {
      const out = output
      output = undefined
      return out
    },
  }
}
