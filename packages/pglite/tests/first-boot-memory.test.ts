import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

interface ChildReport {
  memories: number
  firstFreedAfterMs: number | null
  answer: number
  globalGc: string
}

/**
 * A process with an empty cache, without `--expose-gc`, that watches every
 * wasm memory made and reports when the first one (the booted module's) was
 * collected, for up to `waitMs` after its database answered.
 */
async function firstStartIn(cacheDir: string, waitMs: number, refuse: readonly number[] = []): Promise<ChildReport> {
  const script = join(cacheDir, 'child.mts')
  writeFileSync(
    script,
    `const made: WeakRef<WebAssembly.Memory>[] = []
let firstFreedAt: number | undefined
const watch = new FinalizationRegistry<number>((index) => {
  if (index === 0) firstFreedAt = performance.now()
})
const Original = WebAssembly.Memory
;(WebAssembly as { Memory: unknown }).Memory = new Proxy(Original, {
  construct(target, args, newTarget) {
    if (${JSON.stringify(refuse)}.includes(made.length + 1)) {
      made.push(new WeakRef(new Original({ initial: 1 })))
      throw new RangeError('WebAssembly.Memory(): could not allocate memory (refused by the test)')
    }
    const memory = Reflect.construct(target, args, newTarget === WebAssembly.Memory ? target : newTarget) as WebAssembly.Memory
    watch.register(memory, made.length)
    made.push(new WeakRef(memory))
    return memory
  },
})
// The built package, as installed: it ships the template, so no initdb runs and the first memory is the booted module's.
// A setting of its own: the start-up snapshot the package ships is the default options' only, so this one boots.
const { PGlite } = await import(${JSON.stringify(join(root, 'packages/pglite/dist/index.js'))})
const db = await PGlite.create({ templateCacheDir: ${JSON.stringify(cacheDir)}, postgresqlConf: { application_name: 'first-boot' } })
const { rows } = await db.query('select 40 + 2 as n')
const answeredAt = performance.now()
while (firstFreedAt === undefined && performance.now() - answeredAt < ${waitMs}) await new Promise((r) => setTimeout(r, 50))
// The database still answers after the collection.
const again = await db.query('select $1::int + 1 as n', [rows[0].n])
await db.close()
console.log(JSON.stringify({ memories: made.length, firstFreedAfterMs: firstFreedAt === undefined ? null : Math.round(firstFreedAt - answeredAt), answer: again.rows[0].n, globalGc: typeof (globalThis as { gc?: unknown }).gc }))
`,
  )
  const tsx = join(root, 'node_modules', '.bin', 'tsx')
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(tsx, [script], { timeout: 120_000 }, (err, out, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(out)))
  })
  return JSON.parse(stdout.trim().split('\n').pop()!) as ChildReport
}

describe('the first database after install', () => {
  it('boots again when the module for the restore cannot be made, and the database works', async () => {
    // After the booted module's, the restore's: made ahead of time (a failure there is only a lost head start), then again by the
    // restore itself. Refusing both sends the start down its fallback.
    const report = await firstStartIn(tempDir('pgwasm-first-boot-'), 0, [2, 3])
    expect(report.answer).toBe(43)
    // Booted, refused twice, booted again.
    expect(report.memories).toBe(4)
  }, 120_000)

  // Left to V8, an idle process collects a dropped wasm memory 10-15 s later;
  // until then a server whose first database booted held ~40% more memory.
  it('lets the booted module go at once: its wasm memory is collected within seconds, no --expose-gc needed', async () => {
    const report = await firstStartIn(tempDir('pgwasm-first-boot-'), 5000)
    expect(report.answer).toBe(43)
    // The collector is borrowed, not left on the process's global.
    expect(report.globalGc).toBe('undefined')
    // The booted module, then the one its snapshot was restored into.
    expect(report.memories).toBe(2)
    expect(report.firstFreedAfterMs, 'the booted module was still reachable 5 s after the first answer').not.toBeNull()
  }, 120_000)
})
