/**
 * The README's test recipe and its "many test files" config, run as
 * written: the config (`isolate: false`) over three copies of the README's
 * test file, sharing the README's `test/db.ts`. A worker runs its files one
 * after another in one process; each file must still get a database of its
 * own, reset before each of its tests.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { SCHEMA_PATH } from './helpers.js'

const pkgDir = fileURLToPath(new URL('..', import.meta.url))
const vitestBin = join(pkgDir, '..', '..', 'node_modules', 'vitest', 'vitest.mjs')
const FILES = ['a', 'b', 'c']

/** The README's ts block whose first line starts with `// <name>`. */
function readmeBlock(name: string): string {
  const readme = readFileSync(join(pkgDir, 'README.md'), 'utf8')
  const block = [...readme.matchAll(/```ts\n(\/\/ [\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith(`// ${name}`))
  if (!block) throw new Error(`README has no \`// ${name}\` block`)
  return block
}

/** Replaces `from` in `text`, which must be there. */
function swap(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`README block lost ${JSON.stringify(from)}`)
  return text.replace(from, to)
}

/**
 * The README's test/db.ts with this repository's paths: the built package
 * (imported as an installed one is, so vitest shares it across files), the
 * test schema and its generated client.
 */
function dbModule(): string {
  let db = readmeBlock('test/db.ts')
  db = swap(db, `'@pgwasm/pglite-prisma'`, JSON.stringify(join(pkgDir, 'dist', 'index.js')))
  db = swap(db, `'../src/generated/prisma/client.js'`, JSON.stringify(join(pkgDir, 'tests', 'generated', 'client.ts')))
  return swap(db, `'prisma/schema.prisma'`, JSON.stringify(SCHEMA_PATH))
}

/** The README's test file, plus a test that records what the file's database held and writes to it. */
function testFile(name: string, results: string): string {
  return `${readmeBlock('test/users.test.ts')}
import { appendFileSync } from 'node:fs'

it('starts from the schema, with nothing another file wrote', async () => {
  const before = await prisma.user.findMany()
  appendFileSync(${JSON.stringify(results)}, JSON.stringify({ file: ${JSON.stringify(name)}, pid: process.pid, before }) + '\\n')
  await prisma.user.create({ data: { email: '${name}@x.io' } })
})

it('is reset before its next test', async () => {
  expect(await prisma.user.count()).toBe(0)
})
`
}

it('runs the README config: test files share a worker process, each with its own fresh TestDatabase', async () => {
  const dir = mkdtempSync(join(pkgDir, 'tests', '.isolate-'))
  try {
    const results = join(dir, 'results.jsonl')
    writeFileSync(results, '')
    writeFileSync(join(dir, 'vitest.config.ts'), readmeBlock('vitest.config.ts'))
    writeFileSync(join(dir, 'db.ts'), dbModule())
    for (const name of FILES) writeFileSync(join(dir, `${name}.test.ts`), testFile(name, results))
    // The outer run's variables would make the inner vitest think it is one of its workers.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'NODE_OPTIONS'))
    const out = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(process.execPath, [vitestBin, 'run', '--root', dir], { cwd: pkgDir, env, timeout: 180_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
      )
    })
    expect(out.code, out.output.slice(-2000)).toBe(0)
    const starts = readFileSync(results, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { file: string; pid: number; before: unknown[] })
    expect(starts.map((l) => l.file).sort()).toEqual(FILES)
    // Each file saw only the schema: no row of a file that ran before it in the same process.
    for (const s of starts) expect(s.before, s.file).toEqual([])
    // Fewer processes than files: the files shared a process (the point of the config).
    expect(new Set(starts.map((l) => l.pid)).size).toBeLessThan(FILES.length)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}, 240_000)
