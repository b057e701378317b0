// The engine this checkout builds, for the code and tests that load it.
import { spawnSync } from 'node:child_process'
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

/** How a program of the engine ended. */
export interface ProgramRun {
  status: number | null
  stdout: string
  stderr: string
}

function runProgram(program: string, args: string[], input: string, env: NodeJS.ProcessEnv): ProgramRun {
  const result = spawnSync(process.execPath, [program, ...args], { input, encoding: 'utf8', env: { ...process.env, ...env }, maxBuffer: 64 << 20 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

/** initdb into `dataDir` (superuser postgres, C locale, UTF8, trust; TZ=UTC, else initdb reads every host zone file to guess one). */
export function initCluster(engine: BuiltEngine, dataDir: string, extraArgs: string[] = []): ProgramRun {
  return runProgram(engine.initdb, ['-D', dataDir, '-U', 'postgres', '--locale=C', '--encoding=UTF8', '--auth=trust', ...extraArgs], '', { TZ: 'UTC' })
}

/** The single-user backend on `dataDir`: one statement per line of `sql`, results printed as `name = "value"`. */
export function runSingleUser(engine: BuiltEngine, dataDir: string, sql: string): ProgramRun {
  return runProgram(engine.postgres, ['--single', '-D', dataDir, '-c', 'io_method=sync', 'postgres'], sql, {})
}
