import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { againstList, importCircles, readSources } from '@pgwasm/test-support/source-imports'

/*
 * Rules of the core's layout (docs/architecture.md): `engine/` imports
 * nothing from outside itself and keeps its files in rooms, no import
 * circle, no file over 700 lines, and files under 500 lines but the listed
 * ones. The list is what is left to undo: a new entry fails the test, and an
 * entry that no longer holds must be taken off it.
 */

/** Source files over 500 lines, and why each is still one file. */
const LONG_FILES: Readonly<Record<string, string>> = {
  'engine/backend/backend.ts': 'one running backend: requests, timeouts and crash handling share its state',
  'engine/start/starter.ts': 'every start path (snapshot, template, initdb) and their caches',
  'engine/hooks/encoding-conversions.ts': "Postgres' conversion helpers the build left out, one family of functions",
}

/** engine/'s rooms, and the few files every room shares at its top. */
const ENGINE_ROOMS = ['backend', 'files', 'hooks', 'loading', 'start', 'wire']
const ENGINE_SHARED = ['engine/emscripten.ts', 'engine/engine-error.ts', 'engine/node-builtin.ts']

const sources = readSources(fileURLToPath(new URL('../src', import.meta.url)))

describe('the core source layout', () => {
  it('reads the imports (a check of the reader itself)', () => {
    expect(sources.find((f) => f.path === 'instance/open-instance.ts')?.imports).toContain('engine/start/starter.ts')
  })

  it('keeps engine/ to itself: what it needs of the rest, it declares and is handed', () => {
    const outside = sources
      .filter((f) => f.path.startsWith('engine/'))
      .flatMap((f) => f.imports.filter((target) => !target.startsWith('engine/')).map((target) => `${f.path} -> ${target}`))
    expect(outside).toEqual([])
  })

  it('keeps engine/ in its rooms', () => {
    const misplaced = sources
      .filter((f) => f.path.startsWith('engine/') && !ENGINE_SHARED.includes(f.path))
      .filter((f) => !ENGINE_ROOMS.includes(f.path.split('/')[1]!) || f.path.split('/').length !== 3)
      .map((f) => f.path)
    expect(misplaced).toEqual([])
  })

  it('has no import circle', () => {
    const circles = importCircles(sources).map((members) => [...members].sort().join(' '))
    expect(circles).toEqual([])
  })

  it('keeps files under 500 lines unless listed with a reason, and none over 700', () => {
    const long = sources.filter((f) => f.lines > 500).map((f) => f.path)
    expect(againstList(long, LONG_FILES)).toEqual({ unlisted: [], stale: [] })
    expect(sources.filter((f) => f.lines > 700).map((f) => `${f.path}: ${f.lines} lines`)).toEqual([])
  })
})
