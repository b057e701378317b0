import { describe, expect, it } from 'vitest'
import { endQuietly, useServedDatabase } from './helpers.js'

/*
 * Attacks a hostile client of a shared engine found (issue "shared engine,
 * separate clients"), each written as the attack, asserting what native
 * PostgreSQL gives: the attacker gets its error, the other clients see
 * nothing, the data stays. Every client here logs in as the non-superuser
 * role the server runs them as.
 */

const COLUMNS = Array.from({ length: 200 }, (_, i) => `${i} as c${i}`).join(', ')

describe('a client that prepares statements until the engine is full', () => {
  const served = useServedDatabase({ role: 'app' })

  it('gets 53200 itself; the in-memory database and the other clients go on', async () => {
    const victim = await served.connect()
    await victim.query('create table keep (x int); insert into keep values (42)')
    await victim.query('prepare mine as select x from keep')
    const attacker = await served.connect()
    let refusal: unknown
    let sent = 0
    for (let batch = 0; batch < 8 && refusal === undefined; batch++) {
      let sql = ''
      for (let i = 0; i < 500; i++) sql += `prepare p${sent++} as select ${COLUMNS};`
      refusal = await attacker.query(sql).then(
        () => undefined,
        (err: unknown) => err,
      )
    }
    expect(refusal).toMatchObject({ code: '53200', message: 'out of memory' })
    // The attacker's connection is still a working session.
    expect((await attacker.query('select 1 as one')).rows).toEqual([{ one: 1 }])
    await endQuietly(attacker)

    expect((await victim.query('execute mine')).rows).toEqual([{ x: 42 }])
    await victim.query('insert into keep values (43)')
    const fresh = await served.connect()
    expect((await fresh.query('select count(*)::int as n from keep')).rows).toEqual([{ n: 2 }])
    expect(victim.errors).toEqual([])
  }, 120_000)
})
