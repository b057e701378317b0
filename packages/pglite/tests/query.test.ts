import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { OID, PGlite, identifier, query, raw, sql, type Notice } from '../src/index.js'

/** Prepared statements of the session, read through the simple protocol (never cached itself). */
async function preparedStatements(db: PGlite, statement?: string): Promise<{ name: string; statement: string }[]> {
  const where = statement === undefined ? '' : ` WHERE statement = $q$${statement}$q$`
  const [result] = await db.exec(`SELECT name, statement FROM pg_prepared_statements${where} ORDER BY name`)
  return result!.rows as { name: string; statement: string }[]
}

// One instance per configuration, all created before any test writes: the
// small option suites run first, the main suite (many writes) last.
let db: PGlite
let custom: PGlite
let noCache: PGlite

beforeAll(async () => {
  custom = await PGlite.create({
    parsers: { [OID.INT4]: (v) => `int4:${v}` },
    serializers: { [OID.TEXT]: (v) => `text:${String(v)}` },
  })
  noCache = await PGlite.create({ statementCache: false })
  db = await PGlite.create()
})

afterAll(async () => {
  await custom?.close()
  await noCache?.close()
  await db?.close()
})

describe('instance parsers and serializers options', () => {
  it('parses results with the instance parsers', async () => {
    const { rows } = await custom.query('select 5::int4 as n, 5::int8 as b')
    expect(rows).toEqual([{ n: 'int4:5', b: 5 }])
  })

  it('applies instance parsers to exec results', async () => {
    const [result] = await custom.exec('select 6::int4 as n')
    expect(result!.rows).toEqual([{ n: 'int4:6' }])
  })

  it('lets a per-query parser override an instance parser', async () => {
    const { rows } = await custom.query('select 7::int4 as n', [], { parsers: { [OID.INT4]: (v) => Number(v) * 2 } })
    expect(rows).toEqual([{ n: 14 }])
  })

  it('serializes a parameter with the instance serializer of its type on the first call', async () => {
    const { rows } = await custom.query('select $1::text as t', ['first'])
    expect(rows).toEqual([{ t: 'text:first' }])
  })

  it('serializes a parameter with the instance serializer of its type once the statement is cached', async () => {
    const text = 'select $1::text as t, true as again'
    await custom.query(text, ['a'])
    const { rows } = await custom.query(text, ['b'])
    expect(rows).toEqual([{ t: 'text:b', again: true }])
  })

  it('does not apply a serializer of another type', async () => {
    const { rows } = await custom.query('select $1::varchar as v', ['plain'])
    expect(rows).toEqual([{ v: 'plain' }])
  })
})

describe('statementCache: false', () => {
  it('leaves no prepared statement behind', async () => {
    for (let i = 0; i < 5; i++) expect((await noCache.query('select $1::int as n', [i])).rows).toEqual([{ n: i }])
    expect(await preparedStatements(noCache)).toEqual([])
  })

  it('still serializes array parameters by their described type', async () => {
    const { rows } = await noCache.query('select $1::int[] as a, $2::jsonb as j', [[1, 2], [1, 2]])
    expect(rows).toEqual([{ a: [1, 2], j: [1, 2] }])
  })
})

describe('query() and exec()', () => {
  it('returns rows, fields, affectedRows, command and rowCount for a select with parameters', async () => {
    const result = await db.query('select $1::int as n, $2::text as s', [7, 'seven'])
    expect(result).toEqual({
      rows: [{ n: 7, s: 'seven' }],
      fields: [
        { name: 'n', dataTypeID: OID.INT4 },
        { name: 's', dataTypeID: OID.TEXT },
      ],
      affectedRows: 0,
      command: 'SELECT',
      rowCount: 1,
    })
  })

  it('reports affectedRows and rowCount of an INSERT with parameters', async () => {
    await db.exec('create table q_insert (id int primary key, name text)')
    const result = await db.query('insert into q_insert values ($1, $2), ($3, $4)', [1, 'a', 2, 'b'])
    expect(result).toEqual({ rows: [], fields: [], affectedRows: 2, command: 'INSERT', rowCount: 2 })
  })

  it('reports affectedRows of an UPDATE and a DELETE', async () => {
    await db.exec('create table q_upd (id int); insert into q_upd select generate_series(1, 5)')
    const updated = await db.query('update q_upd set id = id + 10 where id > $1', [2])
    expect(updated).toMatchObject({ command: 'UPDATE', affectedRows: 3, rowCount: 3 })
    const deleted = await db.query('delete from q_upd where id < $1', [100])
    expect(deleted).toMatchObject({ command: 'DELETE', affectedRows: 5, rowCount: 5 })
  })

  it('returns rows with RETURNING and counts them as affected', async () => {
    await db.exec('create table q_ret (id serial primary key, name text)')
    const result = await db.query('insert into q_ret (name) values ($1) returning id, name', ['x'])
    expect(result.rows).toEqual([{ id: 1, name: 'x' }])
    expect(result.affectedRows).toBe(1)
    expect(result.command).toBe('INSERT')
  })

  it('returns the fields of a select that yields no rows', async () => {
    const result = await db.query('select 1::int as a, 2::int8 as b where false')
    expect(result.rows).toEqual([])
    expect(result.fields).toEqual([
      { name: 'a', dataTypeID: OID.INT4 },
      { name: 'b', dataTypeID: OID.INT8 },
    ])
  })

  it("returns rows as arrays with rowMode 'array'", async () => {
    const result = await db.query('select $1::int as a, $2::text as b', [1, 'x'], { rowMode: 'array' })
    expect(result.rows).toEqual([[1, 'x']])
    expect(result.fields.map((f) => f.name)).toEqual(['a', 'b'])
  })

  it('decodes every text value right across output chunks, split frames and non-ASCII text', async () => {
    // Thousands of rows span many engine writes; every 500th row and a run of
    // consecutive rows hold values longer than a write (assembled from
    // pieces); some values are not ASCII.
    const sql = `select g, repeat('ab', g % 50) as a, 'ü-' || g || '-✓' as u, 'row number ' || g as r,
        case when g % 500 = 0 or g between 1001 and 1004 then repeat('x', 20000) || g else '' end as big,
        case when g % 500 = 250 then repeat('é', 9000) || g else '' end as wide
      from generate_series(1, 3000) g`
    const expected = (g: number) => ({
      g,
      a: 'ab'.repeat(g % 50),
      u: `ü-${g}-✓`,
      r: `row number ${g}`,
      big: g % 500 === 0 || (g >= 1001 && g <= 1004) ? 'x'.repeat(20000) + g : '',
      wide: g % 500 === 250 ? 'é'.repeat(9000) + g : '',
    })
    for (let round = 0; round < 2; round++) {
      const { rows } = await db.query<ReturnType<typeof expected>>(sql)
      expect(rows.length).toBe(3000)
      for (const row of rows) if (row.a !== expected(row.g).a || row.big !== expected(row.g).big) expect(row).toEqual(expected(row.g))
      expect(rows).toEqual(Array.from({ length: 3000 }, (_, i) => expected(i + 1)))
      const arrays = await db.query<unknown[]>(sql, [], { rowMode: 'array' })
      expect(arrays.rows).toEqual(rows.map((row) => Object.values(row)))
    }
  })

  it("keeps both columns of duplicate names with rowMode 'array'", async () => {
    const result = await db.query('select 1 as x, 2 as x', [], { rowMode: 'array' })
    expect(result.rows).toEqual([[1, 2]])
  })

  it('applies per-query parsers', async () => {
    const result = await db.query('select 41::int4 as n', [], { parsers: { [OID.INT4]: (v) => `int:${v}` } })
    expect(result.rows).toEqual([{ n: 'int:41' }])
  })

  it('does not leak per-query parsers into the next call of the same SQL', async () => {
    const text = 'select 42::int4 as n, $1::text as s'
    const custom = await db.query(text, ['a'], { parsers: { [OID.INT4]: (v) => `int:${v}` } })
    const plain = await db.query(text, ['b'])
    expect(custom.rows).toEqual([{ n: 'int:42', s: 'a' }])
    expect(plain.rows).toEqual([{ n: 42, s: 'b' }])
  })

  it('applies per-query parsers to an already cached statement and then forgets them', async () => {
    const text = 'select 43::int4 as n'
    const first = await db.query(text)
    const custom = await db.query(text, [], { parsers: { [OID.INT4]: (v) => `int:${v}` } })
    const after = await db.query(text)
    expect([first.rows[0], custom.rows[0], after.rows[0]]).toEqual([{ n: 43 }, { n: 'int:43' }, { n: 43 }])
  })

  it('lets paramTypes choose the parameter type', async () => {
    const typed = await db.query('select $1 as v', ['42'], { paramTypes: [OID.INT4] })
    expect(typed.fields).toEqual([{ name: 'v', dataTypeID: OID.INT4 }])
    expect(typed.rows).toEqual([{ v: 42 }])
  })

  it('keeps statements with and without paramTypes apart', async () => {
    const untyped = await db.query('select $1 as w', ['42'])
    const typed = await db.query('select $1 as w', ['42'], { paramTypes: [OID.INT8] })
    expect(untyped.fields[0]!.dataTypeID).toBe(OID.TEXT)
    expect(untyped.rows).toEqual([{ w: '42' }])
    expect(typed.fields[0]!.dataTypeID).toBe(OID.INT8)
    expect(typed.rows).toEqual([{ w: 42 }])
  })

  it('uses a per-query serializer for its parameter type', async () => {
    const result = await db.query('select $1::text as t', [{ a: 1 }], {
      serializers: { [OID.TEXT]: (v) => `custom:${JSON.stringify(v)}` },
    })
    expect(result.rows).toEqual([{ t: 'custom:{"a":1}' }])
  })

  it('returns one result per statement from exec with cumulative affectedRows', async () => {
    const results = await db.exec(`
      create table q_exec (id int);
      insert into q_exec values (1), (2), (3);
      update q_exec set id = id * 10 where id < 3;
      delete from q_exec where id = 3;
      select id from q_exec order by id;
    `)
    expect(results.map((r) => r.command)).toEqual(['CREATE', 'INSERT', 'UPDATE', 'DELETE', 'SELECT'])
    expect(results.map((r) => r.affectedRows)).toEqual([0, 3, 5, 6, 6])
    expect(results.map((r) => r.rowCount)).toEqual([undefined, 3, 2, 1, 2])
    expect(results[4]!.rows).toEqual([{ id: 10 }, { id: 20 }])
    expect(results[4]!.fields).toEqual([{ name: 'id', dataTypeID: OID.INT4 }])
  })

  it('returns a single empty result from exec of an empty string', async () => {
    const results = await db.exec('')
    expect(results).toEqual([{ rows: [], fields: [], affectedRows: 0 }])
  })

  it("returns rows as arrays from exec with rowMode 'array'", async () => {
    const results = await db.exec('select 1 as a; select 2 as b, 3 as c', { rowMode: 'array' })
    expect(results.map((r) => r.rows)).toEqual([[[1]], [[2, 3]]])
  })

  it('turns template values into parameters with db.sql', async () => {
    const name = "O'Brien; drop table x"
    const result = await db.sql`select ${name}::text as name, ${5}::int as n`
    expect(result.rows).toEqual([{ name, n: 5 }])
  })

  it('flattens nested sql fragments with their parameters in order', async () => {
    await db.exec("create table q_tpl (id int, tag text); insert into q_tpl values (1, 'a'), (2, 'b'), (3, 'a')")
    const filter = sql`where tag = ${'a'} and id > ${1}`
    const result = await db.sql`select id from q_tpl ${filter} and id < ${10} order by id`
    expect(result.rows).toEqual([{ id: 3 }])
  })

  it('splices identifier and raw text without parameters', async () => {
    await db.exec('create table "q Tpl ""Quoted""" (id int); insert into "q Tpl ""Quoted""" values (1), (2)')
    const result = await db.sql`select ${identifier`id`} from ${identifier`q Tpl "Quoted"`} ${raw`order by id desc`} limit ${1}`
    expect(result.rows).toEqual([{ id: 2 }])
  })

  it('builds query text and params with the exported query helper', async () => {
    const built = query`select ${identifier`x`} from t where a = ${1} ${sql`and b = ${'two'}`} ${raw`limit 5`}`
    expect(built).toEqual({ query: 'select "x" from t where a = $1 and b = $2 limit 5', params: [1, 'two'] })
    const { query: text, params } = query`select ${3}::int + ${4}::int as sum`
    const result = await db.query(text, params)
    expect(result.rows).toEqual([{ sum: 7 }])
  })

  it('describes parameter and result types with describeQuery', async () => {
    await db.exec('create table q_desc (id int8, name text, at timestamptz)')
    const described = await db.describeQuery('select id, name, at from q_desc where id = $1 and name = $2')
    expect(described.queryParams.map((p) => p.dataTypeID)).toEqual([OID.INT8, OID.TEXT])
    expect(described.resultFields.map(({ name, dataTypeID }) => ({ name, dataTypeID }))).toEqual([
      { name: 'id', dataTypeID: OID.INT8 },
      { name: 'name', dataTypeID: OID.TEXT },
      { name: 'at', dataTypeID: OID.TIMESTAMPTZ },
    ])
  })

  it('describes a statement without running it', async () => {
    await db.exec('create table q_desc_norun (id int)')
    await db.describeQuery('insert into q_desc_norun values ($1)')
    const { rows } = await db.query('select count(*)::int as n from q_desc_norun')
    expect(rows).toEqual([{ n: 0 }])
  })

  it('resolves 1,000 concurrent queries each with its own result', async () => {
    const results = await Promise.all(Array.from({ length: 1000 }, (_, i) => db.query<{ n: number }>('select $1::int as n', [i])))
    expect(results.map((r) => r.rows[0]!.n)).toEqual(Array.from({ length: 1000 }, (_, i) => i))
  })

  it('delivers RAISE NOTICE messages from query to onNotice', async () => {
    const notices: Notice[] = []
    await db.query(`do $$ begin raise notice 'hello from %', 'query'; end $$`, [], { onNotice: (n) => notices.push(n) })
    expect(notices.map((n) => n.message)).toEqual(['hello from query'])
  })

  it('delivers RAISE NOTICE messages from exec to onNotice with their severity', async () => {
    const notices: Notice[] = []
    await db.exec(`do $$ begin raise notice 'first'; raise warning 'second'; end $$`, { onNotice: (n) => notices.push(n) })
    expect(notices.map((n) => [n.severity, n.message])).toEqual([
      ['NOTICE', 'first'],
      ['WARNING', 'second'],
    ])
  })

  describe('statement cache', () => {
    it('keeps one pgwasm_ prepared statement for SQL run 5 times', async () => {
      const text = 'select $1::int + 1000 as cached_once'
      for (let i = 0; i < 5; i++) expect((await db.query(text, [i])).rows).toEqual([{ cached_once: 1000 + i }])
      const entries = await preparedStatements(db, text)
      expect(entries).toHaveLength(1)
      expect(entries[0]!.name).toMatch(/^pgwasm_/)
    })

    it('returns the new column of select * after ALTER TABLE ADD COLUMN', async () => {
      await db.exec('create table q_alter (a int); insert into q_alter values (1)')
      const before = await db.query('select * from q_alter')
      await db.exec("alter table q_alter add column b text default 'x'")
      const after = await db.query('select * from q_alter')
      expect(before.rows).toEqual([{ a: 1 }])
      expect(after.rows).toEqual([{ a: 1, b: 'x' }])
      expect(after.fields.map((f) => f.name)).toEqual(['a', 'b'])
    })

    it('keeps working after DISCARD ALL dropped the prepared statements', async () => {
      const text = 'select $1::text as discarded'
      await db.query(text, ['before'])
      await db.exec('DISCARD ALL')
      expect(await preparedStatements(db, text)).toEqual([])
      const result = await db.query(text, ['after'])
      expect(result.rows).toEqual([{ discarded: 'after' }])
    })

    it('keeps the number of prepared statements bounded over 100,000 distinct SQL texts', async () => {
      for (let i = 0; i < 100_000; i++) {
        const { rows } = await db.query<{ v: number }>(`select ${i}::int as v`)
        if (rows[0]!.v !== i) expect(rows[0]!.v).toBe(i)
      }
      const entries = await preparedStatements(db)
      expect(entries.length).toBeLessThanOrEqual(105)
      expect(db._internalStats().cachedStatements).toBeLessThanOrEqual(100)
    }, 120_000)
  })

  describe('COPY with /dev/blob', () => {
    it("loads CSV from the blob option with COPY FROM '/dev/blob'", async () => {
      await db.exec('create table q_copy_in (id int, name text)')
      const result = await db.query("COPY q_copy_in FROM '/dev/blob' WITH (FORMAT csv)", [], {
        blob: new Blob(['1,one\n2,"two, too"\n']),
      })
      expect(result).toMatchObject({ command: 'COPY', affectedRows: 2 })
      const { rows } = await db.query('select id, name from q_copy_in order by id')
      expect(rows).toEqual([
        { id: 1, name: 'one' },
        { id: 2, name: 'two, too' },
      ])
    })

    it("loads CSV from the blob option through exec", async () => {
      await db.exec('create table q_copy_exec (id int)')
      const results = await db.exec("COPY q_copy_exec FROM '/dev/blob' WITH (FORMAT csv)", { blob: new Blob(['5\n6\n7\n']) })
      expect(results[results.length - 1]).toMatchObject({ command: 'COPY', affectedRows: 3 })
      const { rows } = await db.query('select sum(id)::int as s from q_copy_exec')
      expect(rows).toEqual([{ s: 18 }])
    })

    it("returns only this statement's CSV in result.blob when COPY TO '/dev/blob' gets a blob option", async () => {
      await db.exec("create table q_copy_out1 (id int, name text); insert into q_copy_out1 values (1, 'a'), (2, 'b')")
      const result = await db.query("COPY (select * from q_copy_out1 order by id) TO '/dev/blob' WITH (FORMAT csv)", [], {
        blob: new Blob([]),
      })
      expect(result.blob).toBeInstanceOf(Blob)
      expect(await result.blob!.text()).toBe('1,a\n2,b\n')
    })

    it("returns result.blob with the CSV text from COPY TO '/dev/blob' without options, as PGlite does", async () => {
      await db.exec("create table q_copy_out2 (id int, name text); insert into q_copy_out2 values (3, 'c'), (4, 'd')")
      const result = await db.query("COPY (select * from q_copy_out2 order by id) TO '/dev/blob' WITH (FORMAT csv)")
      expect(result.blob).toBeInstanceOf(Blob)
      expect(await result.blob!.text()).toBe('3,c\n4,d\n')
    })

    it("does not carry the output of an earlier COPY TO '/dev/blob' into a later result.blob", async () => {
      await db.exec("create table q_copy_a (v text); insert into q_copy_a values ('a'); create table q_copy_b (v text); insert into q_copy_b values ('b')")
      await db.query("COPY q_copy_a TO '/dev/blob' WITH (FORMAT csv)")
      const result = await db.query("COPY q_copy_b TO '/dev/blob' WITH (FORMAT csv)", [], { blob: new Blob([]) })
      expect(await result.blob!.text()).toBe('b\n')
    })
  })
})


describe('rows of a shape used many times (compiled row builder)', () => {
  const SQL = `select g as "n", (-g * 400)::int2 as small, case when g % 7 = 0 then null else g * 100000 end as maybe,
                      'v' || g as "quote""d name", g::text as "1", (g % 2 = 0) as even, g::int8 as big
               from generate_series(1, 80) g order by g`
  const expected = Array.from({ length: 80 }, (_, k) => {
    const g = k + 1
    return { n: g, small: -g * 400, maybe: g % 7 === 0 ? null : g * 100000, 'quote"d name': `v${g}`, 1: String(g), even: g % 2 === 0, big: g }
  })

  it('gives the same rows, in the same key order, before and after the builder takes over', async () => {
    for (let round = 0; round < 3; round++) {
      const { rows } = await db.query<Record<string, unknown>>(SQL)
      expect(rows).toEqual(expected)
      for (const row of rows) expect(Object.keys(row)).toEqual(['1', 'n', 'small', 'maybe', 'quote"d name', 'even', 'big'])
    }
  })

  it('keeps a column named __proto__ an own property, and custom int parsers apply', async () => {
    const { rows } = await db.query<Record<string, unknown>>(`select g as "__proto__" from generate_series(1, 40) g`)
    expect(rows).toHaveLength(40)
    for (const [k, row] of rows.entries()) {
      expect(Object.getPrototypeOf(row)).toBe(Object.prototype)
      expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toBe(k + 1)
    }
    const custom = await db.query<{ g: unknown }>('select g from generate_series(1, 40) g', [], { parsers: { [OID.INT4]: (v) => `int:${v}` } })
    expect(custom.rows[39]).toEqual({ g: 'int:40' })
  })
})
