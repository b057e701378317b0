// The engine this checkout builds, for the code and tests that load it.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { engineDir, engineKey } from './engine-key.js'

export { cacheRoot, engineDir, engineKey } from './engine-key.js'

/** What the build recorded about a built engine (build-info.json). */
export interface EngineBuildInfo {
  key: string
  postgresql: string
  emscripten: string
  clang: string
  /** Seconds each build step took. */
  steps: Record<string, number>
  /** Every file of the engine, by path relative to its directory. */
  files: Record<string, { bytes: number; sha256: string }>
}

/** A built engine: the programs run under Node with the host's files. */
export interface BuiltEngine {
  dir: string
  /** The backend (`postgres`), a Node script beside its .wasm. */
  postgres: string
  /** initdb, which starts the backend as a child process. */
  initdb: string
  info: EngineBuildInfo
}

/** This checkout's engine if it was built (`pnpm engine`), else undefined. */
export function findBuiltEngine(key = engineKey()): BuiltEngine | undefined {
  const dir = engineDir(key)
  const infoFile = join(dir, 'build-info.json')
  if (!existsSync(infoFile)) return undefined
  return {
    dir,
    postgres: join(dir, 'bin', 'postgres'),
    initdb: join(dir, 'bin', 'initdb'),
    info: JSON.parse(readFileSync(infoFile, 'utf8')) as EngineBuildInfo,
  }
}
