/**
 * Prisma's schema engine compiled to WebAssembly (`@prisma/schema-engine-wasm`),
 * loaded once per process and run on a database through {@link HeldSession}.
 */
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils'
import type { PGlite } from '@pgwasm/pglite'
import type * as Wasm from '@prisma/schema-engine-wasm'
import { HeldSession, engineFactory } from './engine-session.js'
import { engineErrorOf } from './schema-engine-errors.js'

type SchemaEngineModule = typeof Wasm

let engineModule: Promise<SchemaEngineModule> | undefined

/**
 * Loads the engine once per process. Its package's entry imports the .wasm
 * file as an ES module, which Node 20 refuses without
 * `--experimental-wasm-modules`; so the bindings module is imported and the
 * bytes instantiated here, which works on every Node version.
 */
function loadEngine(): Promise<SchemaEngineModule> {
  engineModule ??= (async () => {
    const require = createRequire(import.meta.url)
    const bindingsPath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg')
    const bindings = (await import(pathToFileURL(bindingsPath).href)) as SchemaEngineModule & {
      __wbg_set_wasm(exports: WebAssembly.Exports): void
    }
    installPanicRegistry()
    const bytes = await readFile(join(dirname(bindingsPath), 'schema_engine_bg.wasm'))
    const { instance } = await WebAssembly.instantiate(bytes, { './schema_engine_bg.js': withUnrefTimers(bindings) })
    bindings.__wbg_set_wasm(instance.exports)
    ;(instance.exports.__wbindgen_start as () => void)()
    return bindings
  })()
  engineModule.catch(() => {
    engineModule = undefined
  })
  return engineModule
}

/**
 * The engine's imports with its timers unref'd: it arms timeouts (up to a
 * minute) that are cleared or moot once a command finished, and a live timer
 * would keep the process from exiting until it fires.
 */
function withUnrefTimers(bindings: object): WebAssembly.ModuleImports {
  const imports: WebAssembly.ModuleImports = { ...(bindings as WebAssembly.ModuleImports) }
  for (const name of Object.keys(imports)) {
    if (!name.startsWith('__wbg_setTimeout_')) continue
    const arm = imports[name] as (callback: () => void, ms: number) => unknown
    imports[name] = (callback: () => void, ms: number) => {
      const timer = arm(callback, ms)
      ;(timer as { unref?: () => void } | undefined)?.unref?.()
      return timer
    }
  }
  return imports
}

interface PanicRegistry {
  get(): string
  set_message(message: string): void
}

/** The engine reports a Rust panic's message through this global before trapping. */
function installPanicRegistry(): void {
  const global = globalThis as { PRISMA_WASM_PANIC_REGISTRY?: PanicRegistry }
  if (global.PRISMA_WASM_PANIC_REGISTRY) return
  let message = ''
  global.PRISMA_WASM_PANIC_REGISTRY = {
    get: () => message,
    set_message: (m: string) => {
      message = `RuntimeError: ${m}`
    },
  }
}
export const NO_FILTER = { externalTables: [], externalEnums: [] }
export const SCHEMA_PATH = 'schema.prisma'

/** Runs `command` with an engine connected to `db`; the engine is freed afterwards. */
export async function withEngine<T>(db: PGlite, schema: string | undefined, command: (engine: Wasm.SchemaEngine, session: HeldSession) => Promise<T>): Promise<T> {
  const { SchemaEngine } = await loadEngine()
  const session = new HeldSession(db)
  const options = { datamodels: schema === undefined ? undefined : ([[SCHEMA_PATH, schema]] as [string, string][]) }
  let engine: Wasm.SchemaEngine
  try {
    engine = await SchemaEngine.new(options, () => {}, bindMigrationAwareSqlAdapterFactory(engineFactory(session)))
  } catch (error) {
    throw engineErrorOf(error)
  }
  try {
    return await command(engine, session)
  } finally {
    engine.free()
  }
}

/** Runs one engine command inside a held transaction: committed if it succeeds, rolled back if it throws. */
export async function atomically<T>(session: HeldSession, command: () => Promise<T>): Promise<T> {
  await session.begin()
  let result: T
  try {
    result = await command()
  } catch (error) {
    await session.end(false)
    throw error
  }
  await session.end(true)
  return result
}
