import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { PGlite } from '../src/index.js'

/*
 * Postgres logs a failed statement's whole text after its error
 * (`STATEMENT: ...`), and the glue gathered each log line a byte at a time
 * in a JavaScript array: a client's 60 MB batch refused again and again
 * ended the process (issue "hardening", item 5). Lines are capped now.
 */
describe("the engine's log lines", () => {
  const lines: string[] = []
  let db: PGlite
  beforeAll(async () => {
    // With debug above 0 the server log goes to console.debug.
    vi.spyOn(console, 'debug').mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(' ')))
    db = await PGlite.create({ debug: 1 })
  })
  afterAll(async () => {
    await db.close()
    vi.restoreAllMocks()
  })

  it("keep a long line's first 16 kB and say how much was dropped; the database goes on", async () => {
    const padding = 'x'.repeat(4 * 1024 * 1024)
    await expect(db.query(`select '${padding}' as big, no_such_column`)).rejects.toMatchObject({ code: '42703' })
    expect(lines.some((line) => line.includes('STATEMENT'))).toBe(true)
    const longest = Math.max(...lines.map((line) => line.length))
    expect(longest).toBeLessThan(17 * 1024)
    expect(lines.some((line) => /\.\.\. \(\d+ more bytes\)$/.test(line))).toBe(true)
    expect((await db.query('select 1 as one')).rows).toEqual([{ one: 1 }])
  })
})
