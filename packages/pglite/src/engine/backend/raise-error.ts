import { EngineError } from '../engine-error.js'
import type { PostgresModule } from '../emscripten.js'

/** How JavaScript the engine calls reaches it: the module once created, the instance's exports once instantiated. */
export interface EngineAccess {
  readonly module: () => PostgresModule | undefined
  readonly exports: () => WebAssembly.Exports | undefined
}

export interface PostgresError {
  /** The five-character SQLSTATE. */
  readonly code: string
  readonly message: string
  /** The C function whose ERROR this stands for (the error's `routine` field). */
  readonly routine: string
}

/** `ERROR` in `elog.h`. */
const ERROR = 21

type Fn = (...args: number[]) => number

/**
 * `errfinish` keeps the pointers to its file and function names (they are
 * C literals in Postgres' own calls) and reads them when the error is sent,
 * after the longjmp freed our stack: each name is copied once into the
 * engine's heap and kept there, per module. A snapshot restore replaces the
 * heap, so a kept copy is checked before it is used again.
 */
const staticNames = new WeakMap<PostgresModule, Map<string, number>>()

function staticName(mod: PostgresModule, malloc: Fn, name: string): number {
  let names = staticNames.get(mod)
  if (!names) staticNames.set(mod, (names = new Map()))
  const bytes = new TextEncoder().encode(`${name}\0`)
  const kept = names.get(name)
  if (kept !== undefined && bytes.every((b, i) => mod.HEAPU8[kept + i] === b)) return kept
  const at = malloc(bytes.length)
  if (at === 0) return 0
  mod.HEAPU8.set(bytes, at)
  names.set(name, at)
  return at
}

/** Five SQLSTATE characters packed as Postgres' `MAKE_SQLSTATE` does. */
function packSqlstate(code: string): number {
  let packed = 0
  for (let i = 0; i < 5; i++) packed += ((code.charCodeAt(i) - 48) & 0x3f) << (6 * i)
  return packed
}

/**
 * Raises an ERROR from an import a side module called, through Postgres'
 * own `errstart`/`errfinish`: it throws what the engine's longjmp throws,
 * and the nearest `PG_TRY` (or the request loop) recovers as from any
 * ERROR. Unlike `SessionGuards.raise`, error context callbacks are kept:
 * the frames that pushed them are alive, so an ERROR inside `COPY` still
 * says which line, as Postgres' own would.
 */
export function raiseError(engine: EngineAccess, error: PostgresError): never {
  const mod = engine.module()
  const ex = engine.exports() as Record<string, Fn> | undefined
  if (!mod || !ex) throw new EngineError(`the engine is not running; it could not raise "${error.message}"`, { code: 'ENGINE_ABORT' })
  // The text goes through errmsg's format: a literal % must be doubled.
  const str = (s: string): number => mod.stringToUTF8OnStack(s.replaceAll('%', '%%'))
  const file = staticName(mod, ex.malloc!, 'pgwasm')
  const routine = staticName(mod, ex.malloc!, error.routine)
  if (ex.errstart!(ERROR, 0)) {
    ex.errcode!(packSqlstate(error.code))
    ex.errmsg!(str(error.message), 0)
    ex.errfinish!(file, 0, routine)
  }
  throw new EngineError(`the engine did not raise "${error.message}"`, { code: 'ENGINE_ABORT' })
}
