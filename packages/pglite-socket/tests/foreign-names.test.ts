import { describe, expect, it } from 'vitest'
import { useServedDatabase, type TestClient } from './helpers.js'

/*
 * Hostile SQL from one client must not reach another client's state. A
 * client's protocol-level statements live in the one engine session under
 * names the server gives (`c<pid>_<name>`); SQL that names another client's
 * (EXECUTE, DEALLOCATE, CLOSE, FETCH, MOVE) gets the error a PostgreSQL
 * session without it would give, and the owner keeps its statement.
 */
describe("another client's statements and portals, named in SQL", () => {
  const served = useServedDatabase()

  const pid = (client: TestClient): number => (client as unknown as { processID: number }).processID

  async function victimWithStatement(): Promise<{ victim: TestClient; engineName: string }> {
    const victim = await served.connect()
    expect((await victim.query({ name: 'mine', text: 'select $1::int * 2 as twice', values: [21] })).rows).toEqual([{ twice: 42 }])
    const engineName = `c${pid(victim)}_mine`
    // It is there, under the server's name.
    const { rows } = await served.db.query('select name from pg_prepared_statements where name = $1', [engineName])
    expect(rows).toEqual([{ name: engineName }])
    return { victim, engineName }
  }

  it("refuses EXECUTE and DEALLOCATE of another client's statement with 26000, plain or quoted, and the owner keeps it", async () => {
    const { victim, engineName } = await victimWithStatement()
    const attacker = await served.connect()
    await expect(attacker.query(`execute ${engineName}(1)`)).rejects.toMatchObject({ code: '26000', message: `prepared statement "${engineName}" does not exist` })
    await expect(attacker.query(`deallocate "${engineName}"`)).rejects.toMatchObject({ code: '26000' })
    await expect(attacker.query(`DEALLOCATE PREPARE ${engineName.toUpperCase()}`)).rejects.toMatchObject({ code: '26000' })
    await expect(attacker.query(`explain execute ${engineName}(1)`)).rejects.toMatchObject({ code: '26000' })
    // Through the extended protocol too.
    await expect(attacker.query({ text: `deallocate ${engineName}`, values: [] })).rejects.toMatchObject({ code: '26000' })
    expect((await victim.query({ name: 'mine', text: 'select $1::int * 2 as twice', values: [5] })).rows).toEqual([{ twice: 10 }])
    const { rows } = await served.db.query('select count(*)::int as n from pg_prepared_statements where name = $1', [engineName])
    expect(rows).toEqual([{ n: 1 }])
  })

  it('fails the statement as Postgres would: the rest of the query string does not run, and a transaction block is aborted', async () => {
    const { engineName } = await victimWithStatement()
    const attacker = await served.connect()
    await attacker.query('create temp table trail (n int)')
    await expect(attacker.query(`insert into trail values (1); deallocate ${engineName}; insert into trail values (2)`)).rejects.toMatchObject({ code: '26000' })
    expect((await attacker.query('select count(*)::int as n from trail')).rows).toEqual([{ n: 0 }])
    await attacker.query('begin')
    await expect(attacker.query(`execute ${engineName}(1)`)).rejects.toMatchObject({ code: '26000' })
    await expect(attacker.query('select 1')).rejects.toMatchObject({ code: '25P02' })
    await attacker.query('rollback')
    expect((await attacker.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
  })

  it("refuses CLOSE, FETCH and MOVE of another client's portal names with 34000, and leaves the client's own names and ordinary SQL alone", async () => {
    const other = await served.connect()
    const attacker = await served.connect()
    const name = `c${pid(other)}_p`
    await attacker.query('begin')
    for (const sql of [`close ${name}`, `fetch 1 from ${name}`, `move next in "${name}"`]) {
      await expect(attacker.query(sql)).rejects.toMatchObject({ code: '34000', message: `cursor "${name}" does not exist` })
      await attacker.query('rollback; begin')
    }
    await attacker.query('rollback')
    // Names that only look alike, and SQL that is not about statements, run as they are.
    await attacker.query(`create temp table c${pid(other)}_table (c1_col int)`)
    await attacker.query(`insert into c${pid(other)}_table values (1)`)
    expect((await attacker.query(`select c1_col from c${pid(other)}_table`)).rows).toEqual([{ c1_col: 1 }])
    await attacker.query({ name: 'own', text: 'select 7 as seven' })
    expect((await attacker.query(`execute c${pid(attacker)}_own`)).rows).toEqual([{ seven: 7 }])
  })
})
