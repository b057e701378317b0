// The compilers: Emscripten from Debian's archive (unpacked, not installed),
// Debian's LLVM, and Binaryen and acorn from npm (this package's
// devDependencies). Nothing here downloads from a project's own site.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { download } from './downloads.js'
import type { Pins } from './pins.js'
import { run } from './steps.js'

export interface Toolchain {
  /** The environment every Emscripten command runs in. */
  env: NodeJS.ProcessEnv
  /** Emscripten's own directory (emcc, emconfigure, emmake). */
  emscriptenDir: string
  /** `clang --version`'s first line: part of the cache key. */
  clangVersion: string
}

const require = createRequire(import.meta.url)

/** The directory of an npm package this package depends on. */
function packageDir(name: string): string {
  return dirname(require.resolve(`${name}/package.json`))
}

function missingDebianPackages(names: readonly string[]): string[] {
  return names.filter((name) => {
    try {
      return !execFileSync('dpkg-query', ['-W', '-f=${db:Status-Abbrev}', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).startsWith('ii')
    } catch {
      return true
    }
  })
}

/** Installs the Debian packages the build needs (root only), or says which are missing. */
export async function ensureDebianPackages(names: readonly string[], log: string): Promise<void> {
  const missing = missingDebianPackages(names)
  if (missing.length === 0) return
  if (process.getuid?.() !== 0) {
    throw new Error(`the engine build needs these Debian packages: ${missing.join(' ')} (apt-get install ${missing.join(' ')})`)
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  await run('apt-get', ['update', '-qq'], { cwd: '/', env, log })
  await run('apt-get', ['install', '-y', '-qq', ...missing], { cwd: '/', env, log })
}

/** Emscripten unpacked from its Debian package, configured for Debian's LLVM and npm's Binaryen. */
export async function prepareToolchain(pins: Pins, cacheRoot: string, log: string): Promise<Toolchain> {
  await ensureDebianPackages([...pins.llvm.debianPackages, ...pins.buildTools.debianPackages], log)
  const llvmBin = `/usr/lib/llvm-${pins.llvm.major}/bin`
  const home = join(cacheRoot, 'toolchain', `emscripten-${pins.emscripten.debianVersion}`)
  const emscriptenDir = join(home, 'usr', 'share', 'emscripten')
  if (!existsSync(join(emscriptenDir, 'emcc.py'))) {
    const deb = await download(pins.emscripten, join(cacheRoot, 'downloads'))
    rmSync(home, { recursive: true, force: true })
    mkdirSync(home, { recursive: true })
    await run('dpkg-deb', ['-x', deb, home], { cwd: home, log })
  }
  // Emscripten's JavaScript tools import acorn (and source-map) from a
  // node_modules beside them; Debian would provide them as system packages.
  const modules = join(emscriptenDir, 'node_modules')
  rmSync(modules, { recursive: true, force: true })
  mkdirSync(modules)
  for (const name of ['acorn', 'acorn-import-phases', 'source-map']) symlinkSync(packageDir(name), join(modules, name))

  const config = join(home, 'emscripten-config.py')
  writeFileSync(
    config,
    [
      `LLVM_ROOT = ${JSON.stringify(llvmBin)}`,
      `BINARYEN_ROOT = ${JSON.stringify(packageDir('binaryen'))}`,
      `NODE_JS = ${JSON.stringify(process.execPath)}`,
      // System libraries built on first use; keyed by LLVM too, as its code differs.
      `CACHE = ${JSON.stringify(join(cacheRoot, 'toolchain', `emcache-${pins.emscripten.version}-llvm${pins.llvm.major}`))}`,
      '',
    ].join('\n'),
  )
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    EM_CONFIG: config,
    PATH: `${emscriptenDir}:${process.env.PATH ?? ''}`,
    // Emscripten 6.0 expects LLVM 21; Debian bookworm has 22, which works. The
    // warning would also make every configure test that checks for warnings fail.
    EMCC_CFLAGS: '-Wno-version-check',
  }
  const clangVersion = execFileSync(join(llvmBin, 'clang'), ['--version'], { encoding: 'utf8' }).split('\n')[0] ?? ''
  return { env, emscriptenDir, clangVersion }
}
