// Every export of `@electric-sql/pglite` (the pinned version installed beside
// us) exists in the built `@pgwasm/pglite` under the same subpath and name,
// for import and for require. The reference list is read from the installed
// package, so a version bump re-checks the whole surface.
import { readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const require = createRequire(join(root, 'package.json'))
// The reference exports no ./package.json; its engine file sits in dist/.
const referenceRoot = dirname(dirname(require.resolve('@electric-sql/pglite/pglite.wasm')))
const reference = JSON.parse(readFileSync(join(referenceRoot, 'package.json'), 'utf8')) as { exports: Record<string, unknown> }

// Subpaths not provided yet; the test checks they are still missing, so
// closing a gap fails it until the entry is removed here.
const KNOWN_GAPS: Record<string, string> = {
  './worker': 'LeaderChangedError is not exported by our worker entry (src/worker.ts)',
}

/** Module subpaths (not the engine's .wasm/.data files), with `*` expanded to the reference's files. */
function referenceSubpaths(): string[] {
  const out: string[] = []
  for (const key of Object.keys(reference.exports)) {
    if (/\.(wasm|data)$/.test(key)) continue
    if (!key.includes('*')) {
      out.push(key)
      continue
    }
    const dir = join(referenceRoot, 'dist', 'contrib')
    for (const file of readdirSync(dir)) {
      if (file.endsWith('.d.ts')) out.push(key.replace('*', file.slice(0, -'.d.ts'.length)))
    }
  }
  return out
}

function specifier(pkg: string, subpath: string): string {
  return subpath === '.' ? pkg : `${pkg}/${subpath.slice(2)}`
}

function missingNames(ours: object, theirs: object): string[] {
  return Object.keys(theirs).filter((name) => name !== 'default' && !(name in ours))
}

const subpaths = referenceSubpaths()

describe('the exports of @electric-sql/pglite exist in the built @pgwasm/pglite', () => {
  it('covers every contrib module the reference ships', () => {
    expect(subpaths.filter((s) => s.startsWith('./contrib/')).length).toBeGreaterThanOrEqual(34)
  })

  for (const subpath of subpaths) {
    const gap = KNOWN_GAPS[subpath]
    it(`provides ${subpath} with the same names via import${gap ? ' (known gap)' : ''}`, async () => {
      const theirs = (await import(specifier('@electric-sql/pglite', subpath))) as object
      const ours = (await import(specifier('@pgwasm/pglite', subpath))) as object
      if (gap) expect(missingNames(ours, theirs), gap).not.toEqual([])
      else expect(missingNames(ours, theirs)).toEqual([])
    })

    if (subpath === './worker') continue // ours is ESM only (a worker script is a module)
    it(`provides ${subpath} with the same names via require`, () => {
      const theirs = require(specifier('@electric-sql/pglite', subpath)) as object
      const ours = require(specifier('@pgwasm/pglite', subpath)) as object
      expect(missingNames(ours, theirs)).toEqual([])
    })
  }

  it('gives each namespace of the root the reference members', async () => {
    const theirs = (await import('@electric-sql/pglite')) as unknown as Record<string, object>
    const ours = (await import('@pgwasm/pglite')) as unknown as Record<string, object>
    for (const ns of ['types', 'parse', 'protocol', 'messages'] as const) {
      expect(missingNames(ours[ns]!, theirs[ns]!), ns).toEqual([])
    }
  })

  it('gives the type OID constants the reference values', async () => {
    const theirs = (await import('@electric-sql/pglite')).types as unknown as Record<string, unknown>
    const { types } = await import('@pgwasm/pglite')
    for (const [name, value] of Object.entries(theirs)) {
      if (typeof value === 'number') expect((types as unknown as Record<string, unknown>)[name], name).toBe(value)
    }
  })
})
