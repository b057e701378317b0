import { serialize } from 'pg-protocol'

/**
 * One extended-protocol round trip (Parse, Bind, Describe, Execute, Sync) as
 * bytes: what a driver sends for a parameterized query, so the raw paths of
 * both engines get exactly the same work.
 */
export function extendedQuery(sql: string, params: readonly unknown[] = []): Uint8Array {
  return Buffer.concat([
    serialize.parse({ text: sql }),
    serialize.bind({ values: params.map((p) => (p === null || p === undefined ? null : String(p))) }),
    serialize.describe({ type: 'P' }),
    serialize.execute(),
    serialize.sync(),
  ])
}

/** Runs an already parsed statement: the per-call bytes of a prepared query. */
export function bindDescribeExecuteSync(params: readonly unknown[], statement: string): Buffer {
  return Buffer.concat([
    serialize.bind({ statement, values: params.map((p) => String(p)) }),
    serialize.describe({ type: 'P' }),
    serialize.execute(),
    serialize.sync(),
  ])
}

export function parseNamed(name: string, sql: string): Buffer {
  return Buffer.concat([serialize.parse({ name, text: sql }), serialize.sync()])
}

export function startupMessage(user: string, database: string): Buffer {
  return serialize.startup({ user, database })
}

/**
 * Walks backend messages as bytes arrive (frames may span chunks), counting
 * ReadyForQuery and remembering the first ErrorResponse, so raw paths are
 * checked for errors without decoding rows.
 */
export class ReplyScanner {
  readyCount = 0
  errors = 0
  bytes = 0
  firstError: string | undefined
  #header = new Uint8Array(5)
  #headerFill = 0
  #remaining = 0
  #type = 0
  #errorText: number[] | undefined

  reset(): void {
    this.readyCount = 0
    this.errors = 0
    this.bytes = 0
    this.firstError = undefined
    this.#headerFill = 0
    this.#remaining = 0
    this.#errorText = undefined
  }

  readonly feed = (chunk: Uint8Array): void => {
    this.bytes += chunk.length
    let i = 0
    while (i < chunk.length) {
      if (this.#remaining > 0) {
        const take = Math.min(this.#remaining, chunk.length - i)
        if (this.#errorText && this.#errorText.length < 512) {
          for (let k = 0; k < take && this.#errorText.length < 512; k++) this.#errorText.push(chunk[i + k]!)
        }
        i += take
        this.#remaining -= take
        if (this.#remaining === 0) this.#endMessage()
        continue
      }
      this.#header[this.#headerFill++] = chunk[i++]!
      if (this.#headerFill === 5) {
        this.#headerFill = 0
        this.#type = this.#header[0]!
        const len = ((this.#header[1]! << 24) | (this.#header[2]! << 16) | (this.#header[3]! << 8) | this.#header[4]!) >>> 0
        this.#remaining = len - 4
        if (this.#type === 0x45 && this.firstError === undefined) this.#errorText = []
        if (this.#remaining === 0) this.#endMessage()
      }
    }
  }

  #endMessage(): void {
    if (this.#type === 0x5a) this.readyCount++
    else if (this.#type === 0x45) {
      this.errors++
      if (this.#errorText) {
        // ErrorResponse fields are (code byte, cstring) pairs; 'M' is the message.
        const text = Buffer.from(this.#errorText).toString('utf8')
        const m = text.split('\0').find((f) => f.startsWith('M'))
        this.firstError ??= m ? m.slice(1) : text
        this.#errorText = undefined
      }
    }
  }
}
