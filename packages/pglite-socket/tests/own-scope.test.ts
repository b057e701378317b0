import { describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { endQuietly, useServedDatabase, type TestClient } from './helpers.js'

/*
 * DEALLOCATE ALL, CLOSE ALL, DISCARD ALL and DISCARD TEMP act on the whole
 * engine session. Sent by one client they dropped every client's prepared
 * statements (a `pg` client's named query then failed with 26000 for good),
 * held cursors and temporary tables. Each now does what it does in a
 * PostgreSQL backend to the sending client's own, and nothing to the others'.
 */
describe('statements that act on the whole session act on their own client only', () => {
  const served = useServedDatabase()

  /** Gives `c` a named protocol statement, a SQL-prepared one, a held cursor, a temp table and a LISTEN. */
  async function furnish(c: TestClient, who: string): Promise<void> {
    await c.query({ name: `q_${who}`, text: 'select $1::text as who', values: [who] })
    await c.query(`prepare p_${who} as select '${who}' as who`)
    await c.query('begin')
    await c.query(`declare cur_${who} cursor with hold for select '${who}' as who`)
    await c.query('commit')
    await c.query(`create temp table tmp_${who} (who text)`)
    await c.query(`listen ch_${who}`)
  }

  /** What of its furnishings `c` still has, as it sees them. */
  async function holdings(c: TestClient, who: string): Promise<Record<string, boolean>> {
    const works = (p: Promise<unknown>): Promise<boolean> => p.then(() => true, () => false)
    return {
      named: await works(c.query({ name: `q_${who}`, text: 'select $1::text as who', values: [who] })),
      prepared: await works(c.query(`execute p_${who}`)),
      cursor: await works(c.query(`fetch 1 from cur_${who}`)),
      temp: await works(c.query(`select * from tmp_${who}`)),
    }
  }

  const ALL = { named: true, prepared: true, cursor: true, temp: true }

  for (const statement of ['DEALLOCATE ALL', 'DEALLOCATE PREPARE ALL', 'CLOSE ALL', 'DISCARD TEMP', 'DISCARD ALL']) {
    it(`${statement} leaves another client's statements, cursors, temp tables and listens, and does its work on the sender's`, async () => {
      const a = await served.connect()
      const b = await served.connect()
      try {
        await furnish(a, 'a')
        await furnish(b, 'b')
        await b.query(statement)
        expect(await holdings(a, 'a')).toEqual(ALL)
        // a still gets what is sent to its channel.
        const heard = new Promise<string | undefined>((resolve) => a.once('notification', (n) => resolve(n.payload)))
        await b.query(`notify ch_a, 'still here'`)
        expect(await within(heard, 5000, "a's notification")).toBe('still here')
        // What the statement drops in a PostgreSQL backend, b no longer has (pg still thinks q_b is prepared: 26000, as from a server).
        const dropsStatements = statement.startsWith('DEALLOCATE') || statement === 'DISCARD ALL'
        const closesCursors = statement === 'CLOSE ALL' || statement === 'DISCARD ALL'
        const dropsTemp = statement.startsWith('DISCARD')
        expect(await holdings(b, 'b')).toEqual({ named: !dropsStatements, prepared: !dropsStatements, cursor: !closesCursors, temp: !dropsTemp })
      } finally {
        await endQuietly(a)
        await endQuietly(b)
      }
    })
  }

  it("DISCARD ALL lets go of the sender's session advisory locks, not another client's", async () => {
    const a = await served.connect()
    const b = await served.connect()
    try {
      await a.query('select pg_advisory_lock(601)')
      await b.query('select pg_advisory_lock(602)')
      await b.query('discard all')
      const tryLock = async (c: TestClient, key: number): Promise<boolean> =>
        (await c.query<{ got: boolean }>('select pg_try_advisory_lock($1) as got', [key])).rows[0]!.got
      expect(await tryLock(a, 602)).toBe(true)
      expect(await tryLock(b, 601)).toBe(false)
    } finally {
      await endQuietly(a)
      await endQuietly(b)
    }
  })

  it('DISCARD ALL in a transaction block is still refused with 25001', async () => {
    const a = await served.connect()
    try {
      await a.query('begin')
      await expect(a.query('discard all')).rejects.toMatchObject({ code: '25001' })
      await a.query('rollback')
    } finally {
      await endQuietly(a)
    }
  })
})
