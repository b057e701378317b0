// Which built engine belongs to this checkout: a hash of everything the build
// reads from the repository (pins, the C and JavaScript it adds, the build
// script, the npm tools' versions). The build and the code that loads the engine compute it
// the same way, so a checkout never picks up an engine built from other inputs.
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The package's own directory. */
export const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url))

/** Where built engines, downloads and the toolchain are kept: outside the repository. */
export function cacheRoot(): string {
  return process.env.PGWASM_ENGINE_CACHE || join(homedir(), '.cache', 'pgwasm', 'engine')
}

/** The npm packages the toolchain runs (Emscripten's JavaScript tools, Binaryen). */
const TOOL_PACKAGES = ['acorn', 'acorn-import-phases', 'binaryen', 'source-map']

function filesIn(dir: string, suffix: string): string[] {
  return readdirSync(join(PACKAGE_DIR, dir))
    .filter((name) => name.endsWith(suffix))
    .sort()
    .map((name) => join(dir, name))
}

/** The hash that names this checkout's engine (16 hex digits). */
export function engineKey(): string {
  const hash = createHash('sha256')
  const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as { devDependencies?: Record<string, string> }
  const tools = Object.fromEntries(TOOL_PACKAGES.map((name) => [name, manifest.devDependencies?.[name]]))
  hash.update(JSON.stringify(tools))
  for (const file of ['pins.json', ...filesIn('host', '.c'), ...filesIn('host', '.js'), ...filesIn('build', '.ts')]) {
    hash.update(`\0${file}\0`)
    hash.update(readFileSync(join(PACKAGE_DIR, file)))
  }
  return hash.digest('hex').slice(0, 16)
}

/** Where the engine with this key is (or will be) once built. */
export function engineDir(key = engineKey()): string {
  return join(cacheRoot(), 'builds', key)
}
