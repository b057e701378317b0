import { afterEach, describe, expect, it, vi } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { PGlite } from '../src/index.js'
import { rejection } from './helpers.js'

/**
 * Reopening a directory database: after a clean close Postgres starts from
 * its shutdown checkpoint with no WAL to replay; after an engine death it
 * recovers. Read from the server log (`debug: 1` writes it to console.debug).
 */

const RECOVERY = /redo starts|not properly shut down|automatic recovery in progress/

/** The server log lines printed while `run` runs. */
async function serverLog(run: () => Promise<void>): Promise<string[]> {
  const lines: string[] = []
  const spy = vi.spyOn(console, 'debug').mockImplementation((...args: unknown[]) => {
    lines.push(args.map(String).join(' '))
  })
  try {
    await run()
  } finally {
    spy.mockRestore()
  }
  return lines
}

afterEach(() => vi.restoreAllMocks())

describe('reopening a directory database', () => {
  it('starts from the shutdown checkpoint after a clean close: no WAL recovery runs', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    await db.exec('create table t (id int primary key); insert into t select generate_series(1, 100)')
    await db.close()
    let count = 0
    const log = await serverLog(async () => {
      const again = await PGlite.create(dir, { debug: 1 })
      count = (await again.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n
      await again.close()
    })
    expect(count).toBe(100)
    expect(log.some((l) => /database system was shut down at/.test(l)), log.join('\n')).toBe(true)
    expect(log.filter((l) => RECOVERY.test(l))).toEqual([])
  })

  it('recovers from the WAL when the engine died with the directory open (the same log check sees it)', async () => {
    const dir = tempDir()
    const log = await serverLog(async () => {
      const db = await PGlite.create(dir, { debug: 1 })
      await db.exec('create table t (id int primary key); insert into t values (1)')
      const heap = db.Module.HEAPU8
      heap.fill(0xff, 4096, Math.min(heap.length, 64 << 20))
      // The failing call reopens the directory, with crash recovery.
      await rejection(db.query('select 1'))
      expect((await db.query<{ n: number }>('select count(*)::int as n from t')).rows[0]!.n).toBe(1)
      await db.close()
    })
    expect(log.some((l) => RECOVERY.test(l)), log.join('\n')).toBe(true)
  })
})
