import type { DatabaseError } from '../errors.js'
import { isBuiltinIntParser, type Parser } from '../types/parsers.js'
import { Backend, TxStatus } from '../engine/wire/message-codes.js'
import type { FrameSink } from './frames.js'
import { readDatabaseError, readNotification, readServerFields, type NoticeFields, type Notification } from './messages.js'
import { ChunkText, cstringEnd, decodeText, readInt16, readInt32 } from './text.js'

/** A result column, as `@electric-sql/pglite` reports it. */
export interface Field {
  readonly name: string
  readonly dataTypeID: number
}

export type RowMode = 'object' | 'array'

/** One statement's result. */
export interface ResultSet {
  rows: unknown[]
  fields: Field[]
  command?: string
  rowCount?: number
  /** Rows changed by this and the earlier statements of the same exec (PGlite's meaning). */
  affectedRows?: number
}

/** How rows of one RowDescription are built; made once per description. */
export interface RowShape {
  readonly fields: Field[]
  readonly keys: readonly string[]
  readonly parsers: readonly (Parser | undefined)[]
  readonly typeIds: readonly number[]
  /** A column named `__proto__` needs defineProperty: assignment would set the prototype. */
  readonly hasProtoKey: boolean
  /** Columns of int2/int4 with the built-in parser: digits are read from the bytes, no string made. */
  readonly intColumns: readonly boolean[]
  /** Rows decoded with this shape; a shape that keeps being used gets a compiled row builder. */
  rowsSeen: number
  /** Makes a row object from the column values in one literal (fast properties, no per-key transitions). */
  build: ((values: readonly unknown[]) => Record<string, unknown>) | undefined | null
}

/** Rows after which a shape gets a compiled builder: a one-off query should not pay for compiling one. */
const BUILDER_AFTER_ROWS = 32
const INT2 = 21
const INT4 = 23

/**
 * `(v) => ({ "k0": v[0], ... })` for these keys, or null where code
 * generation is refused (a page's Content-Security-Policy) or pointless.
 * Keys are JSON string literals, so no column name can inject code.
 */
function compileRowBuilder(keys: readonly string[]): RowShape['build'] {
  if (keys.length === 0 || keys.length > 100 || keys.includes('__proto__')) return null
  try {
    const body = `return {${keys.map((k, i) => `${JSON.stringify(k)}: v[${i}]`).join(', ')}}`
    return new Function('v', body) as (values: readonly unknown[]) => Record<string, unknown>
  } catch {
    return null
  }
}

/** The value of ASCII decimal digits (with an optional minus), as `+text` would give for an int2/int4 column. */
function readDecimal(buf: Uint8Array, start: number, end: number): number {
  let i = start
  const negative = buf[i] === 0x2d
  if (negative) i++
  let n = 0
  for (; i < end; i++) n = n * 10 + (buf[i]! - 0x30)
  return negative ? -n : n
}

export function readRowDescription(buf: Uint8Array, start: number, end: number): Field[] {
  const count = readInt16(buf, start)
  const fields: Field[] = new Array(count)
  let i = start + 2
  for (let f = 0; f < count; f++) {
    const nameEnd = cstringEnd(buf, i, end)
    const name = decodeText(buf, i, nameEnd)
    i = nameEnd + 1
    // table OID (4), column number (2), then the type OID.
    const dataTypeID = readInt32(buf, i + 6) >>> 0
    i += 18
    fields[f] = { name, dataTypeID }
  }
  return fields
}

export function makeRowShape(fields: Field[], parsers: Readonly<Record<number, Parser>>): RowShape {
  return {
    fields,
    keys: fields.map((f) => f.name),
    parsers: fields.map((f) => parsers[f.dataTypeID]),
    typeIds: fields.map((f) => f.dataTypeID),
    hasProtoKey: fields.some((f) => f.name === '__proto__'),
    intColumns: fields.map((f) => (f.dataTypeID === INT2 || f.dataTypeID === INT4) && isBuiltinIntParser(parsers[f.dataTypeID])),
    rowsSeen: 0,
    build: undefined,
  }
}

const COMMANDS_WITH_AFFECTED_ROWS = new Set(['INSERT', 'UPDATE', 'DELETE', 'COPY', 'MERGE'])

/**
 * Builds results straight from the frames the engine writes: rows from
 * DataRow bytes through a per-RowDescription shape, no intermediate message
 * objects. Keeps the first error and reads on to ReadyForQuery.
 */
export class ResultCollector implements FrameSink {
  results: ResultSet[] = []
  affectedRows = 0
  error: DatabaseError | undefined
  notices: NoticeFields[] | undefined
  notifications: Notification[] | undefined
  /** Parameter type OIDs from a ParameterDescription, if one came. */
  paramTypes: number[] | undefined
  /** Set when a RowDescription or NoData answered a Describe. */
  described: RowShape | null | undefined
  parseComplete = false
  /** Status byte of the last ReadyForQuery. */
  txStatus: number = TxStatus.Idle
  #shape: RowShape | undefined
  #rows: unknown[] = []
  #rowMode: RowMode = 'object'
  #parsers: Readonly<Record<number, Parser>> = {}
  /** Column values of the row being built, reused across rows. */
  readonly #values: unknown[] = []
  readonly #text = new ChunkText()

  /**
   * Re-arms the collector for one exec. `shape` is the known row shape of a
   * cached statement, for requests that carry no Describe.
   */
  reset(parsers: Readonly<Record<number, Parser>>, rowMode: RowMode, shape?: RowShape): this {
    this.results = []
    this.affectedRows = 0
    this.error = undefined
    this.notices = undefined
    this.notifications = undefined
    this.paramTypes = undefined
    this.described = undefined
    this.parseComplete = false
    this.#shape = shape
    this.#rows = []
    this.#rowMode = rowMode
    this.#parsers = parsers
    this.#text.clear()
    return this
  }

  /** Drops references to the last exec's rows (kept only until read). */
  release(): void {
    this.results = []
    this.#rows = []
    this.#shape = undefined
    this.#text.clear()
  }

  get rowsHeld(): number {
    return this.#rows.length + this.results.reduce((n, r) => n + r.rows.length, 0)
  }

  onFrame(type: number, buf: Uint8Array, start: number, end: number): void {
    switch (type) {
      case Backend.DataRow:
        this.#rows.push(this.#decodeRow(buf, start))
        break
      case Backend.RowDescription: {
        const shape = makeRowShape(readRowDescription(buf, start, end), this.#parsers)
        this.#shape = shape
        this.described = shape
        break
      }
      case Backend.CommandComplete:
        this.#complete(decodeText(buf, start, cstringEnd(buf, start, end)))
        break
      case Backend.ReadyForQuery:
        this.txStatus = buf[start]!
        break
      case Backend.ErrorResponse:
        this.error ??= readDatabaseError(buf, start, end)
        break
      case Backend.NoticeResponse:
        ;(this.notices ??= []).push(readServerFields(buf, start, end))
        break
      case Backend.NotificationResponse:
        ;(this.notifications ??= []).push(readNotification(buf, start, end))
        break
      case Backend.ParameterDescription: {
        const count = readInt16(buf, start)
        const types = new Array<number>(count)
        for (let p = 0; p < count; p++) types[p] = readInt32(buf, start + 2 + 4 * p) >>> 0
        this.paramTypes = types
        break
      }
      case Backend.NoData:
        this.described = null
        break
      case Backend.ParseComplete:
        this.parseComplete = true
        break
    }
  }

  #decodeRow(buf: Uint8Array, start: number): unknown {
    const shape = this.#shape
    const count = readInt16(buf, start)
    let i = start + 2
    if (this.#rowMode === 'array') {
      const row = new Array<unknown>(count)
      for (let c = 0; c < count; c++) {
        const length = readInt32(buf, i)
        i += 4
        if (length < 0) {
          row[c] = null
          continue
        }
        if (shape?.intColumns[c]) {
          row[c] = readDecimal(buf, i, i + length)
          i += length
          continue
        }
        const text = this.#text.decode(buf, i, i + length)
        i += length
        const parse = shape?.parsers[c]
        row[c] = parse ? parse(text, shape!.typeIds[c]!) : text
      }
      return row
    }
    if (shape && shape.build === undefined && ++shape.rowsSeen >= BUILDER_AFTER_ROWS) shape.build = compileRowBuilder(shape.keys)
    if (shape?.build) {
      const values = this.#values
      values.length = count
      for (let c = 0; c < count; c++) {
        const length = readInt32(buf, i)
        i += 4
        if (length < 0) {
          values[c] = null
        } else if (shape.intColumns[c]) {
          values[c] = readDecimal(buf, i, i + length)
          i += length
        } else {
          const text = this.#text.decode(buf, i, i + length)
          i += length
          const parse = shape.parsers[c]
          values[c] = parse ? parse(text, shape.typeIds[c]!) : text
        }
      }
      return shape.build(values)
    }
    const row: Record<string, unknown> = {}
    const keys = shape?.keys
    const hasProtoKey = shape?.hasProtoKey === true
    for (let c = 0; c < count; c++) {
      const length = readInt32(buf, i)
      i += 4
      const key = keys ? keys[c]! : String(c)
      let value: unknown = null
      if (length >= 0) {
        const text = this.#text.decode(buf, i, i + length)
        i += length
        const parse = shape?.parsers[c]
        value = parse ? parse(text, shape!.typeIds[c]!) : text
      }
      if (hasProtoKey && key === '__proto__') {
        Object.defineProperty(row, key, { value, enumerable: true, writable: true, configurable: true })
      } else {
        row[key] = value
      }
    }
    return row
  }

  #complete(tag: string): void {
    const space = tag.indexOf(' ')
    const command = space < 0 ? tag : tag.slice(0, space)
    const last = tag.slice(tag.lastIndexOf(' ') + 1)
    const rowCount = space < 0 ? NaN : Number.parseInt(last, 10)
    if (COMMANDS_WITH_AFFECTED_ROWS.has(command) && !Number.isNaN(rowCount)) this.affectedRows += rowCount
    const result: ResultSet = {
      rows: this.#rows,
      fields: this.#shape ? this.#shape.fields : [],
      command,
      affectedRows: this.affectedRows,
    }
    if (!Number.isNaN(rowCount)) result.rowCount = rowCount
    this.results.push(result)
    this.#rows = []
    this.#shape = undefined
  }
}
