import type { PostgresModule } from '../emscripten.js'

/** The longest line of the engine's stdout or stderr kept; the rest of a longer line is dropped. */
export const MAX_LOG_LINE = 16 * 1024

interface Tty {
  output: number[]
  /** Bytes of the current line dropped past {@link MAX_LOG_LINE}. */
  pgwasmDropped?: number
}

interface TtyOps {
  put_char(tty: Tty, value: number | null): void
  pgwasmCapped?: true
}

/**
 * Caps the lines the engine writes to stdout and stderr. The glue gathers a
 * line a byte at a time in a JavaScript array until its newline, and
 * Postgres logs a failed statement's whole text after its error (`STATEMENT:
 * ...`): a client's 60 MB batch of statements, refused again and again, made
 * arrays of 60 million numbers and ended the process (JavaScript heap out of
 * memory). A longer line keeps its first {@link MAX_LOG_LINE} bytes and
 * says how many it lost.
 */
export function capLogLines(mod: PostgresModule): void {
  for (const fd of [1, 2]) {
    const stream = mod.FS.getStream(fd) as { tty?: Tty & { ops?: TtyOps } } | null
    const ops = stream?.tty?.ops
    if (!ops || ops.pgwasmCapped) continue
    const put = ops.put_char.bind(ops)
    ops.put_char = (tty, value) => {
      if (value === null || value === 10) {
        const dropped = tty.pgwasmDropped ?? 0
        if (dropped > 0) {
          tty.pgwasmDropped = 0
          for (const byte of new TextEncoder().encode(` ... (${dropped} more bytes)`)) tty.output.push(byte)
        }
      } else if (tty.output.length >= MAX_LOG_LINE) {
        tty.pgwasmDropped = (tty.pgwasmDropped ?? 0) + 1
        return
      }
      put(tty, value)
    }
    ops.pgwasmCapped = true
  }
}
