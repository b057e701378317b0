// `pnpm engine`: builds PostgreSQL to WebAssembly from Debian's sources, once
// per set of inputs. The result is kept in the cache (outside the repository),
// named by the hash of everything the build reads; a second run with the same
// inputs finds it and does nothing.
//
//   --force    build again even when this key is built
//   --verify   build again in a fresh directory and compare every file with
//              the kept build (two builds of the same pins must be identical)
//   --jobs N   make's parallelism (default: the number of CPUs)
//   --keep     keep the work directory (source, objects, logs) afterwards
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { cacheRoot, engineDir, engineKey } from '../src/engine-key.js'
import type { EngineBuildInfo } from '../src/index.js'
import { buildPostgres } from './postgres.js'
import { readPins } from './pins.js'
import { BuildStepError, step } from './steps.js'
import { prepareToolchain } from './toolchain.js'

function listFiles(root: string, dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? listFiles(root, path) : [relative(root, path)]
  })
}

function fileHashes(root: string): EngineBuildInfo['files'] {
  const files: EngineBuildInfo['files'] = {}
  for (const file of listFiles(root).sort()) {
    const bytes = readFileSync(join(root, file))
    files[file] = { bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') }
  }
  return files
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    // `pnpm engine -- --verify` hands the script a `--` of its own.
    args: process.argv.slice(2).filter((arg) => arg !== '--'),
    options: {
      force: { type: 'boolean', default: false },
      verify: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      jobs: { type: 'string' },
    },
  })
  const key = engineKey()
  const target = engineDir(key)
  const built = existsSync(join(target, 'build-info.json'))
  if (built && !values.force && !values.verify) {
    console.log(`engine: ${key} is already built: ${target}`)
    return
  }
  const root = cacheRoot()
  const pins = readPins()
  const jobs = Number(values.jobs ?? availableParallelism())
  // One fixed place, whatever the cache's: PostgreSQL records its compiler
  // flags (pg_config, pg_config()), and those name the work directory.
  const workDir = join(process.env.PGWASM_ENGINE_WORK || '/tmp/pgwasm-engine-work', key)
  rmSync(workDir, { recursive: true, force: true })
  mkdirSync(workDir, { recursive: true })
  console.log(`engine: building ${key} (PostgreSQL ${pins.postgresql.version}, Emscripten ${pins.emscripten.version}) in ${workDir}`)

  const steps: Record<string, number> = {}
  const timed = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
    const started = Date.now()
    const result = await work()
    steps[name] = Math.round((Date.now() - started) / 100) / 10
    return result
  }
  const toolchain = await timed('toolchain', () =>
    step('toolchain (Debian LLVM, Emscripten from its Debian package)', () => prepareToolchain(pins, root, join(workDir, 'toolchain.log'))),
  )
  const staged = await timed('postgres', () => buildPostgres({ pins, toolchain, cacheRoot: root, workDir, jobs }))
  const files = fileHashes(staged)

  if (values.verify && built) {
    const kept = JSON.parse(readFileSync(join(target, 'build-info.json'), 'utf8')) as EngineBuildInfo
    const differing = [...new Set([...Object.keys(kept.files), ...Object.keys(files)])].filter(
      (file) => kept.files[file]?.sha256 !== files[file]?.sha256,
    )
    if (!values.keep) rmSync(workDir, { recursive: true, force: true })
    if (differing.length > 0) throw new Error(`the second build differs from ${target} in ${differing.length} files: ${differing.slice(0, 10).join(', ')}`)
    console.log(`engine: the second build is byte-identical to ${target} (${Object.keys(files).length} files)`)
    return
  }

  const info: EngineBuildInfo = {
    key,
    postgresql: pins.postgresql.version,
    emscripten: pins.emscripten.version,
    clang: toolchain.clangVersion,
    steps,
    files,
  }
  writeFileSync(join(staged, 'build-info.json'), `${JSON.stringify(info, null, 2)}\n`)
  rmSync(target, { recursive: true, force: true })
  mkdirSync(join(root, 'builds'), { recursive: true })
  try {
    renameSync(staged, target)
  } catch (error) {
    // The work directory may be on another file system (/tmp as tmpfs).
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error
    cpSync(staged, target, { recursive: true })
  }
  if (!values.keep) rmSync(workDir, { recursive: true, force: true })
  const wasm = statSync(join(target, 'bin', 'postgres.wasm')).size
  console.log(`engine: built ${target} (postgres.wasm ${(wasm / 1048576).toFixed(1)} MiB) in ${Object.values(steps).reduce((a, b) => a + b, 0).toFixed(0)} s`)
}

main().catch((error: unknown) => {
  console.error(`engine: ${error instanceof BuildStepError || error instanceof Error ? error.message : String(error)}`)
  process.exitCode = 1
})
