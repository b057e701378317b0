import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { againstList, importCircles, readSources } from '@pgwasm/test-support/source-imports'

/*
 * The server's rooms (docs/architecture.md): each imports only from the
 * rooms before it. `copy/` and `pooler/` stand side by side.
 */
const RANK: Readonly<Record<string, number>> = { wire: 1, sql: 2, copy: 3, pooler: 3, session: 4, net: 5, '.': 6 }

/** Source files over 500 lines, and why each is still one file. */
const LONG_FILES: Readonly<Record<string, string>> = {
  'pooler/multiplexer.ts': 'the engine turns, logins and advisory-lock waits share the owner state',
  'session/session.ts': "one client's state, its pump and the engine half of a batch: the parts it hands a view of itself are in their own files",
}

const sources = readSources(fileURLToPath(new URL('../src', import.meta.url)))
const roomOf = (path: string): string => (path.includes('/') ? path.slice(0, path.indexOf('/')) : '.')

describe('the server source layout', () => {
  it('reads the imports (a check of the reader itself)', () => {
    expect(sources.find((f) => f.path === 'session/session.ts')?.imports).toContain('pooler/multiplexer.ts')
  })

  it('puts every file in a known room', () => {
    expect(sources.filter((f) => RANK[roomOf(f.path)] === undefined).map((f) => f.path)).toEqual([])
  })

  it('imports only from earlier rooms (or its own)', () => {
    const against: string[] = []
    for (const file of sources) {
      const room = roomOf(file.path)
      for (const target of file.imports) {
        const other = roomOf(target)
        if (other === room) continue
        if (RANK[other]! >= RANK[room]!) against.push(`${file.path} -> ${target}`)
      }
    }
    expect(against).toEqual([])
  })

  it('has no import circle', () => {
    expect(importCircles(sources)).toEqual([])
  })

  it('keeps files under 500 lines unless listed with a reason', () => {
    const long = sources.filter((f) => f.lines > 500).map((f) => f.path)
    // A listed file that got short is taken off the list (stale).
    expect(againstList(long, LONG_FILES)).toEqual({ unlisted: [], stale: [] })
  })
})
