import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it, vi } from 'vitest'

const here = dirname(fileURLToPath(import.meta.url))
const readme = readFileSync(join(here, '..', 'README.md'), 'utf8')
const examples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!)
const workDir = join(here, '.readme-examples')
const entry = pathToFileURL(join(here, '..', 'src', 'index.ts')).href
const liveEntry = pathToFileURL(join(here, '..', 'src', 'live.ts')).href
const contribEntry = pathToFileURL(join(here, '..', 'src', 'contrib.ts')).href
const protocolEntry = pathToFileURL(join(here, '..', 'src', 'protocol.ts')).href
const sqlEntry = pathToFileURL(join(here, '..', 'src', 'sql.ts')).href

function expectedOutputs(code: string): unknown[] {
  return [...code.matchAll(/console\.log\(.*\/\/ → (.*)$/gm)].map((m) => JSON.parse(m[1]!))
}

describe('README examples', () => {
  mkdirSync(workDir, { recursive: true })
  afterAll(() => rmSync(workDir, { recursive: true, force: true }))

  it('has examples to run', () => {
    expect(examples.length).toBeGreaterThanOrEqual(8)
  })

  examples.forEach((code, i) => {
    const title = code.split('\n').find((l) => l.includes('console.log')) ?? `example ${i + 1}`
    it(`prints what it says: ${title.trim().slice(0, 60)}`, async () => {
      const file = join(workDir, `example-${i}.ts`)
      writeFileSync(
        file,
        code
          .replaceAll(`from '@pgwasm/pglite'`, `from '${entry}'`)
          .replaceAll(`from '@pgwasm/pglite/live'`, `from '${liveEntry}'`)
          .replaceAll(`from '@pgwasm/pglite/contrib'`, `from '${contribEntry}'`)
          .replaceAll(`from '@pgwasm/pglite/protocol'`, `from '${protocolEntry}'`)
          .replaceAll(`from '@pgwasm/pglite/sql'`, `from '${sqlEntry}'`),
      )
      const printed: unknown[] = []
      const spy = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
        printed.push(args.length === 1 ? args[0] : args)
      })
      try {
        await import(pathToFileURL(file).href)
      } finally {
        spy.mockRestore()
      }
      expect(JSON.parse(JSON.stringify(printed))).toEqual(expectedOutputs(code))
    })
  })
})
