import { describe, expect, it } from 'vitest'
import { PGlite } from '@pgwasm/pglite'
import { within } from '@pgwasm/test-support/async'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { endQuietly, pgClient, serve, type TestClient } from './helpers.js'

/*
 * The engine of a directory database dies in a way nobody foresaw (no known
 * SQL does that any more, so the test overwrites the engine's memory, as an
 * engine bug would). As PostgreSQL does after a backend crash, the server
 * ends every connection, the database comes back with crash recovery, and
 * new connections find every committed row.
 */
describe('pgwasm-server when the engine of a directory database dies', () => {
  const dir = tempDir('pgwasm-socket-restart-')

  it('ends the connected clients (57P02 for the idle ones), reopens the directory, and serves new clients every committed row', async () => {
    const db = await PGlite.create(dir)
    const { server, port } = await serve(db)
    const clients: TestClient[] = []
    try {
      for (let i = 0; i < 3; i++) clients.push(await pgClient(port))
      const [writer, idle, inTx] = clients as [TestClient, TestClient, TestClient]
      await writer.query('create table t (n int)')
      await writer.query('insert into t select generate_series(1, 100)')
      await idle.query(`set application_name = 'idle one'`)
      await inTx.query('begin')
      await inTx.query('insert into t values (-1)')
      const inTxEnded = new Promise<Error>((resolve) => inTx.once('error', resolve))
      const idleEnded = new Promise<Error>((resolve) => idle.once('error', resolve))

      const heap = db.Module.HEAPU8
      heap.fill(0xff, 4096, Math.min(heap.length, 64 << 20))
      // The client whose statement met the dead engine.
      const failed = await inTx.query('select 1').catch((e: unknown) => e)
      expect(failed).toBeInstanceOf(Error)
      expect(String((failed as Error).message)).toMatch(/the engine aborted/)
      await within(inTxEnded, 5000, 'the failing client is disconnected')

      // A new client is served by the new engine, with every committed row and none of the open transaction's.
      const fresh = await pgClient(port)
      clients.push(fresh)
      expect((await fresh.query('select count(*)::int as n, min(n) as lo from t')).rows).toEqual([{ n: 100, lo: 1 }])
      // The idle client of the old session is ended, as PostgreSQL ends the others after a crash.
      const idleError = (await within(idleEnded, 5000, 'the idle client is ended')) as Error & { code?: string }
      expect(idleError.code).toBe('57P02')
      const afterEnd = await idle.query('select 1').catch((e: unknown) => e)
      expect(afterEnd).toBeInstanceOf(Error)
      // The server goes on: writes through the new engine are kept across a clean stop.
      await fresh.query('insert into t values (101)')
      expect(db.closed).toBe(false)
    } finally {
      await Promise.all(clients.map((c) => endQuietly(c)))
      await server.stop()
      await db.close()
    }
    const again = await PGlite.create(dir)
    expect((await again.query('select count(*)::int as n, max(n) as hi from t')).rows).toEqual([{ n: 101, hi: 101 }])
    await again.close()
  })
})
