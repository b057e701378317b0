import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { WASM_TIERING_BUDGET, tieringFlag, type TieringContext } from '../src/engine/loading/wasm-tiering.js'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..', '..')

/**
 * A child process that starts a database, then asks V8 whether a small
 * wasm loop it ran 40 x 50,000 times (~34M of budget: more than V8's default
 * on Node 20 and 24, far less than 2,000M) is still baseline (Liftoff) code.
 */
const PROBE = `import { setFlagsFromString } from 'node:v8'
import { PGlite } from ${JSON.stringify(join(here, '..', 'src', 'index.ts'))}
const db = await PGlite.create()
await db.query('select 1')
setFlagsFromString('--allow-natives-syntax')
const isLiftoff = new Function('f', 'return %IsLiftoffFunction(f)')
// (func (export "f") (param i32) (result i32) (local i32): add the counter to local 1 until it reaches 0)
const bytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 6, 1, 96, 1, 127, 1, 127, 3, 2, 1, 0, 7, 5, 1, 1, 102, 0, 0,
  10, 27, 1, 25, 1, 1, 127, 3, 64, 32, 1, 32, 0, 106, 33, 1, 32, 0, 65, 1, 107, 34, 0, 13, 0, 11, 32, 1, 11])
const f = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports.f
let sum = 0
for (let round = 0; round < 40; round++) {
  sum += f(50_000)
  await new Promise((resolve) => setTimeout(resolve, 5))
}
// A tier-up compiles in the background: give a busy machine time to finish one.
for (let waited = 0; isLiftoff(f) && waited < 3000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50))
console.log(JSON.stringify({ liftoff: isLiftoff(f), sum }))
await db.close()
`

async function probe(nodeArgs: string[], env: Record<string, string> = {}): Promise<{ liftoff: boolean; sum: number }> {
  const script = join(tempDir('pgwasm-tiering-'), 'probe.mts')
  writeFileSync(script, PROBE)
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...nodeArgs, '--import', 'tsx', script], { cwd: root, timeout: 120_000, env: { ...process.env, ...env } }, (err, stdout, stderr) =>
      err ? reject(new Error(stderr || String(err))) : resolve(JSON.parse(stdout.trim().split('\n').pop()!) as { liftoff: boolean; sum: number }),
    )
  })
}

const node20: TieringContext = { env: {}, execArgv: [], v8Version: '11.3.244.8-node.38', otherRuntime: false }

describe('the wasm tiering budget', () => {
  it('is raised for the engine, unless the process chose its own or PGWASM_WASM_TIERING_BUDGET says otherwise', () => {
    expect(tieringFlag(node20)).toBe(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`)
    expect(tieringFlag({ ...node20, v8Version: '13.6.233.17-node.53' })).toBe(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`)
    expect(tieringFlag({ ...node20, env: { PGWASM_WASM_TIERING_BUDGET: '5000000' } })).toBe('--wasm-tiering-budget=5000000')
    expect(tieringFlag({ ...node20, env: { PGWASM_WASM_TIERING_BUDGET: 'default' } })).toBeUndefined()
    for (const own of ['--wasm-tiering-budget=1', '--liftoff-only', '--no-liftoff', '--no-wasm-dynamic-tiering']) {
      expect(tieringFlag({ ...node20, execArgv: ['--enable-source-maps', own] }), own).toBeUndefined()
    }
    // Runtimes and V8 lines it was not measured on are left alone.
    expect(tieringFlag({ ...node20, otherRuntime: true })).toBeUndefined()
    expect(tieringFlag({ ...node20, v8Version: '14.1.0' })).toBeUndefined()
    expect(tieringFlag({ ...node20, v8Version: undefined })).toBeUndefined()
  })

  it('refuses a PGWASM_WASM_TIERING_BUDGET that is not `default` or a positive integer', () => {
    for (const bad of ['0', '-5', '1e9', 'fast', '3000000000', '12.5']) {
      expect(() => tieringFlag({ ...node20, env: { PGWASM_WASM_TIERING_BUDGET: bad } }), bad).toThrow(RangeError)
    }
  })

  it("is the process's budget once a database started; V8's own with `default` or a flag of the process's own", async () => {
    const huge = { PGWASM_WASM_TIERING_BUDGET: '2000000000' }
    const [raised, left, own] = await Promise.all([
      probe([], huge),
      probe([], { PGWASM_WASM_TIERING_BUDGET: 'default' }),
      // The process's own flag wins over the variable.
      probe(['--wasm-tiering-budget=1800000'], huge),
    ])
    // The same loop ran in each (same result); only the budget differs.
    expect(new Set([raised.sum, left.sum, own.sum]).size).toBe(1)
    expect(raised.liftoff).toBe(true)
    expect(left.liftoff).toBe(false)
    expect(own.liftoff).toBe(false)
  }, 180_000)
})
