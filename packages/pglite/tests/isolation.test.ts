import { describe, expect, it } from 'vitest'
import { PGlite } from '../src/index.js'

const userTables = `select relname from pg_class where oid >= 16384 and relkind = 'r' order by relname`

describe('in-memory databases are independent', () => {
  it('never shows a write of one database in a database created after it, whether it was checkpointed or closed', async () => {
    const first = await PGlite.create()
    for (const how of ['left open', 'checkpointed', 'closed']) {
      const writer = await PGlite.create()
      await writer.exec(`create table written_${how.replace(' ', '_')} (a int); insert into written_${how.replace(' ', '_')} values (1)`)
      if (how === 'checkpointed') await writer.exec('checkpoint')
      if (how === 'closed') await writer.close()
      const next = await PGlite.create()
      expect((await next.query(userTables)).rows, how).toEqual([])
      // The same DDL must succeed: catalogs and OIDs are the new database's own.
      await next.exec('create table written_left_open (a int)')
      await next.close()
      if (how !== 'closed') await writer.close()
    }
    expect((await first.query(userTables)).rows).toEqual([])
    await first.close()
  })

  it('keeps a clone and its source apart in both directions', async () => {
    const source = await PGlite.create()
    await source.exec('create table s (a int); insert into s values (1)')
    const copy = await source.clone()
    await source.exec('insert into s values (2)')
    await copy.exec('insert into s values (3); create table only_in_copy (a int)')
    expect((await source.query('select a from s order by a')).rows).toEqual([{ a: 1 }, { a: 2 }])
    expect((await copy.query('select a from s order by a')).rows).toEqual([{ a: 1 }, { a: 3 }])
    expect((await source.query(`select count(*)::int as n from pg_class where relname = 'only_in_copy'`)).rows).toEqual([{ n: 0 }])
    await copy.close()
    await source.close()
  })
})
