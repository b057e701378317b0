import { readdir, truncate } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { EngineError, PGlite } from '../src/index.js'

// A data directory damaged on disk: the error says what Postgres found and
// what the user can do, not only the engine's `Aborted()`.
describe('a damaged data directory', () => {
  async function damaged(damage: (dir: string) => Promise<void>): Promise<EngineError> {
    const dir = tempDir('pgwasm-damaged-')
    const db = await PGlite.create(dir)
    await db.exec('create table t (v int); insert into t values (1)')
    await db.close()
    await damage(dir)
    const err = await PGlite.create(dir).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(EngineError)
    expect((err as EngineError).code).toBe('STARTUP_FAILED')
    return err as EngineError
  }

  it('a truncated pg_control: the PANIC line and the advice are in the message', async () => {
    const err = await damaged((dir) => truncate(join(dir, 'global', 'pg_control'), 0))
    expect(err.message).toContain('PANIC: could not read file "global/pg_control"')
    expect(err.message).toContain('restore it from a backup or a dump')
    expect(err.message).not.toContain('Aborted()')
  })

  it('truncated WAL segments: no valid checkpoint record', async () => {
    const err = await damaged(async (dir) => {
      const wal = join(dir, 'pg_wal')
      for (const f of (await readdir(wal)).filter((n) => /^[0-9A-F]{24}$/.test(n))) await truncate(join(wal, f), 100)
    })
    expect(err.message).toMatch(/PANIC: could not locate a valid checkpoint record/)
    expect(err.message).toContain('restore it from a backup or a dump')
  })
})
