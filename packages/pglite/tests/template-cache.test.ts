import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'
import { clearTemplateMemory, templateKey } from '../src/engine/template.js'
import { clearSnapshotMemory } from '../src/engine/starter.js'
import { templatePath } from '../src/engine/template-disk.js'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..', '..')
const dirs: string[] = []
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'pgwasm-cache-'))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function forgetProcessCaches(): void {
  clearTemplateMemory()
  clearSnapshotMemory()
}

async function selectOne(cacheDir: string): Promise<void> {
  const db = await PGlite.create({ templateCacheDir: cacheDir })
  expect((await db.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  await db.close()
}

function corrupt(file: string): void {
  const bytes = readFileSync(file)
  for (let i = 1000; i < bytes.length; i += 4096) bytes[i] = bytes[i]! ^ 0xff
  writeFileSync(file, bytes)
}

describe('template and snapshot disk cache', () => {
  it('gives a different cache file to a different engine version or initdb arguments', async () => {
    const dir = '/cache'
    const a = await templatePath(dir, templateKey({ engineVersion: 'pglite-0.5.16' }))
    const b = await templatePath(dir, templateKey({ engineVersion: 'pglite-0.5.17' }))
    const c = await templatePath(dir, templateKey({ engineVersion: 'pglite-0.5.16' }, { initdbArgs: ['--no-data-checksums'] }))
    expect(new Set([a, b, c]).size).toBe(3)
  })

  it('rebuilds a corrupt template entry instead of using it', async () => {
    const cacheDir = tempDir()
    forgetProcessCaches()
    await selectOne(cacheDir)
    // The snapshot is written in the background after the first start.
    await expect.poll(() => readdirSync(cacheDir).filter((f) => f.endsWith('.bin')).length, { timeout: 20_000 }).toBe(2)
    const template = join(cacheDir, readdirSync(cacheDir).find((f) => f.startsWith('template-'))!)
    const snapshot = join(cacheDir, readdirSync(cacheDir).find((f) => f.startsWith('snapshot-'))!)
    corrupt(template)
    rmSync(snapshot)
    forgetProcessCaches()
    await selectOne(cacheDir)
    const rebuilt = readFileSync(template)
    const { createHash } = await import('node:crypto')
    expect(createHash('sha256').update(rebuilt.subarray(32)).digest().equals(rebuilt.subarray(0, 32))).toBe(true)
  })

  it('ignores a corrupt snapshot entry and starts from the template', async () => {
    const cacheDir = tempDir()
    forgetProcessCaches()
    await selectOne(cacheDir)
    await expect.poll(() => readdirSync(cacheDir).some((f) => f.startsWith('snapshot-')), { timeout: 20_000 }).toBe(true)
    const snapshot = join(cacheDir, readdirSync(cacheDir).find((f) => f.startsWith('snapshot-'))!)
    corrupt(snapshot)
    forgetProcessCaches()
    await selectOne(cacheDir)
  })

  it('lets two processes fill one cache at once, leaving whole entries and no temporary files', async () => {
    const cacheDir = tempDir()
    const script = join(cacheDir, 'child.mts')
    writeFileSync(
      script,
      `import { PGlite } from ${JSON.stringify(join(root, 'packages/pglite/src/index.ts'))}
const db = await PGlite.create({ templateCacheDir: ${JSON.stringify(cacheDir)} })
const { rows } = await db.query('select 40 + 2 as n')
await db.close()
// Give the background snapshot write time to finish before exiting.
await new Promise((r) => setTimeout(r, 1500))
console.log(rows[0].n)
`,
    )
    const tsx = join(root, 'node_modules', '.bin', 'tsx')
    const run = (): Promise<string> =>
      new Promise((resolve, reject) => {
        execFile(tsx, [script], { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(stdout.trim())))
      })
    expect(await Promise.all([run(), run()])).toEqual(['42', '42'])
    const files = readdirSync(cacheDir).filter((f) => f !== 'child.mts')
    expect(files.filter((f) => f.endsWith('.tmp'))).toEqual([])
    expect(files.filter((f) => f.startsWith('template-'))).toHaveLength(1)
    // Both entries are whole: a third process starts from them.
    expect(await run()).toBe('42')
  }, 180_000)
})
