import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { againstList, importCircles, readSources } from '@pgwasm/test-support/source-imports'

/*
 * Rules of the core's layout (docs/architecture.md): `engine/` imports
 * nothing from outside itself, no import circle, and files under 500 lines
 * but the listed ones. The list is what is left to undo: a new entry fails
 * the test, and an entry that no longer holds must be taken off it.
 */

/** Source files over 500 lines, and why each is still one file. */
const LONG_FILES: Readonly<Record<string, string>> = {
  'engine/backend.ts': 'one running backend: requests, callbacks and crash handling share its state',
  'engine/starter.ts': 'every start path (snapshot, template, initdb) and their caches',
  'engine/encoding-conversions.ts': "Postgres' conversion helpers the build left out, one family of functions",
}

const sources = readSources(fileURLToPath(new URL('../src', import.meta.url)))

describe('the core source layout', () => {
  it('reads the imports (a check of the reader itself)', () => {
    expect(sources.find((f) => f.path === 'instance/open-instance.ts')?.imports).toContain('engine/starter.ts')
  })

  it('keeps engine/ to itself: what it needs of the rest, it declares and is handed', () => {
    const outside = sources
      .filter((f) => f.path.startsWith('engine/'))
      .flatMap((f) => f.imports.filter((target) => !target.startsWith('engine/')).map((target) => `${f.path} -> ${target}`))
    expect(outside).toEqual([])
  })

  it('has no import circle', () => {
    const circles = importCircles(sources).map((members) => [...members].sort().join(' '))
    expect(circles).toEqual([])
  })

  it('keeps files under 500 lines unless listed with a reason', () => {
    const long = sources.filter((f) => f.lines > 500).map((f) => f.path)
    expect(againstList(long, LONG_FILES)).toEqual({ unlisted: [], stale: [] })
  })
})
