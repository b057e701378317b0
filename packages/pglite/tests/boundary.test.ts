import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { hostileSideModule } from '@pgwasm/test-support/hostile-side-module'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { DatabaseError, PGlite } from '../src/index.js'
import { citext } from '../src/contrib/citext.js'
import { pg_trgm } from '../src/contrib/pg_trgm.js'

/*
 * The engine's boundary, tried as an attacker with ordinary SQL would: no
 * statement may run code in the host, end the engine, or put data outside
 * the data directory.
 */

type Marked = typeof globalThis & { __pgwasmHostile?: string }
const marked = globalThis as Marked

async function rejection(p: Promise<unknown>): Promise<DatabaseError> {
  try {
    await p
  } catch (err) {
    expect(err).toBeInstanceOf(DatabaseError)
    return err as DatabaseError
  }
  throw new Error('expected a rejection')
}

/** Writes `bytes` to `path` in the engine's file system, as SQL alone can. */
async function writeWithSql(db: PGlite, path: string, bytes: Uint8Array): Promise<void> {
  const { rows } = await db.query<{ oid: number }>('select lo_from_bytea(0, $1) as oid', [bytes])
  await db.query('select lo_export($1, $2)', [rows[0]!.oid, path])
}

describe('side modules: only ours are ever loaded', () => {
  let dir: string
  let marker: string
  let payload: string
  beforeAll(async () => {
    dir = tempDir('pgwasm-boundary-')
    marker = join(dir, 'ran')
    // Evaluated inside the glue, where `require` is Node's: a file proves it ran.
    payload = `globalThis.__pgwasmHostile = 'ran'; require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`
  })
  afterAll(async () => {
    delete marked.__pgwasmHostile
  })

  const nothingRan = (): void => {
    expect(marked.__pgwasmHostile).toBeUndefined()
    expect(existsSync(marker)).toBe(false)
  }

  it('LOAD of a module written with lo_export is refused before the loader sees it', async () => {
    const db = await PGlite.create()
    await writeWithSql(db, '/tmp/x.so', hostileSideModule(payload))
    const err = await rejection(db.exec(`load '/tmp/x.so'`))
    expect(err.code).toBe('42501')
    expect(err.message).toContain('could not load library "/tmp/x.so"')
    expect(err.message).toContain('not one of them')
    nothingRan()
    expect((await db.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
    await db.close()
  })

  it('CREATE FUNCTION ... LANGUAGE C and a library search path SQL can set are refused the same way', async () => {
    const db = await PGlite.create()
    await writeWithSql(db, '/tmp/evil.so', hostileSideModule(payload))
    expect((await rejection(db.exec(`create function f() returns int language c as '/tmp/evil.so', 'f'`))).code).toBe('42501')
    await db.exec(`set dynamic_library_path = '/tmp'`)
    expect((await rejection(db.exec(`load 'evil'`))).message).toContain('not one of them')
    nothingRan()
    await db.close()
  })

  it('the shipped files cannot be overwritten, and a module of the same name elsewhere is refused', async () => {
    const db = await PGlite.create()
    for (const path of ['/pglite/lib/postgresql/plpgsql.so', '/pglite/lib/postgresql/new.so', '/pglite/share/postgresql/extension/plpgsql--1.0.sql']) {
      const err = await rejection(writeWithSql(db, path, hostileSideModule(payload)))
      expect(err.code).toBe('42501')
      expect(err.message).toContain('only under /tmp')
    }
    await writeWithSql(db, '/tmp/plpgsql.so', hostileSideModule(payload))
    await db.exec(`set dynamic_library_path = '/tmp'`)
    const err = await rejection(db.exec(`load 'plpgsql'`))
    expect(err.code).toBe('42501')
    nothingRan()
    await db.close()
  })

  it("a file SQL left in /tmp is gone for the next database that reuses the engine's module", async () => {
    const first = await PGlite.create()
    await writeWithSql(first, '/tmp/left-behind', new TextEncoder().encode('x'))
    await first.close()
    const second = await PGlite.create()
    const err = await rejection(second.query(`select pg_read_binary_file('/tmp/left-behind')`))
    expect(err.code).toBe('58P01')
    await second.close()
  })

  it('a byte-identical copy of a shipped module loads wherever it lies, and so does the original', async () => {
    const db = await PGlite.create()
    const { rows } = await db.query<{ data: Uint8Array }>(`select pg_read_binary_file('/pglite/lib/postgresql/plpgsql.so') as data`)
    await writeWithSql(db, '/tmp/copy.so', rows[0]!.data)
    await db.exec(`load '/tmp/copy.so'`)
    await db.close()
    const other = await PGlite.create()
    await other.exec(`create function g() returns int language plpgsql as $$ begin return 7; end $$`)
    expect((await other.query('select g() as v')).rows).toEqual([{ v: 7 }])
    await other.close()
  })

  it('preload lists naming other files are refused when set, ALTER SYSTEM included (where it is allowed)', async () => {
    const db = await PGlite.create({ postgresqlConf: { allow_alter_system: 'on' } })
    await writeWithSql(db, '/tmp/x.so', hostileSideModule(payload))
    for (const sql of [
      `alter system set shared_preload_libraries = '/tmp/x.so'`,
      `alter system set session_preload_libraries = 'plpgsql, /tmp/x.so'`,
      `set local_preload_libraries = '/tmp/x'`,
    ]) {
      const err = await rejection(db.exec(sql))
      expect(err.code).toBe('22023')
      expect(err.detail).toContain('not one of them')
    }
    await db.exec(`set session_preload_libraries = 'plpgsql'`)
    nothingRan()
    await db.close()
  })
})

describe('no statement leaves a database that does not open again', () => {
  // Each wrote a file the next start reads, and the directory no longer opened:
  // PG_VERSION ("from PostgreSQL x"), standby.signal ("standby mode is not
  // supported"), postgresql.auto.conf (a shared_buffers no start can allocate).
  const attacks: { sql: string; code: string }[] = [
    { sql: `copy (select 'x') to '/pglite/data/PG_VERSION'`, code: '42501' },
    { sql: `copy (select '') to '/pglite/data/standby.signal'`, code: '42501' },
    { sql: `copy (select 'garbage') to '/tmp/../pglite/data/global/pg_control'`, code: '42501' },
    { sql: `select lo_export(LO_OID, '/pglite/data/base/5/' || pg_relation_filenode('kept'))`, code: '42501' },
    { sql: `select lo_export(LO_OID, 'PG_VERSION')`, code: '42501' },
    { sql: `alter system set shared_buffers = '100GB'`, code: '0A000' },
    // Catalog rows changed by hand: "database postgres does not exist" at the next start, or tables no name reaches.
    { sql: `update pg_database set datname = 'gone' where datname = current_database()`, code: '42501' },
    { sql: `delete from pg_namespace where nspname = 'public'`, code: '42501' },
    { sql: `with gone as (delete from pg_catalog.pg_class where relname = 'kept' returning 1) select count(*) from gone`, code: '42501' },
    // Catalogs' definitions changed by DDL, as a server refuses it ("is a system catalog").
    { sql: `truncate pg_database`, code: '42501' },
    { sql: `truncate pg_namespace cascade`, code: '42501' },
    { sql: `alter table pg_class add column x int`, code: '42501' },
    { sql: `create index on pg_attribute (attname)`, code: '42501' },
  ]
  let dir: string
  beforeAll(() => {
    dir = tempDir('pgwasm-unopenable-')
  })

  it('refuses SQL that writes a file into the data directory, a setting for the next start or a catalog row, and the directory opens with its data', async () => {
    const db = await PGlite.create(dir)
    await db.exec('create table kept (v int); insert into kept values (1), (2)')
    const lo = (await db.query<{ oid: number }>(`select lo_from_bytea(0, 'junk') as oid`)).rows[0]!.oid
    for (const { sql, code } of attacks) {
      const err = await rejection(db.exec(sql.replace('LO_OID', String(lo))))
      expect(err.code, sql).toBe(code)
    }
    expect((await rejection(db.exec(`copy kept to '/pglite/data/kept.copy'`))).message).toContain('only under /tmp')
    await db.close()
    const again = await PGlite.create(dir)
    expect((await again.query<{ n: number }>('select count(*)::int as n from kept')).rows).toEqual([{ n: 2 }])
    await again.close()
  })

  it('still lets SQL write under /tmp, to /dev/blob and to /dev/null, read the catalogs and update pg_settings', async () => {
    const db = await PGlite.create()
    await db.exec(`create table t (v int); insert into t values (42)`)
    await db.exec(`copy t to '/tmp/t.copy'`)
    await db.exec(`copy t to '/dev/null'`)
    // Catalogs stay readable, and the settings view writable as PostgreSQL documents it.
    await db.exec(`update pg_settings set setting = '8MB' where name = 'work_mem'`)
    expect((await db.query(`show work_mem`)).rows).toEqual([{ work_mem: '8MB' }])
    expect((await db.query<{ n: number }>(`select count(*)::int as n from pg_class where relname = 't'`)).rows).toEqual([{ n: 1 }])
    await writeWithSql(db, '/tmp/lo.bin', new TextEncoder().encode('x'))
    expect((await db.query(`select pg_read_file('/tmp/t.copy') as f, pg_read_file('/tmp/lo.bin') as l`)).rows).toEqual([{ f: '42\n', l: 'x' }])
    const [copied] = await db.exec(`copy t to '/dev/blob'`)
    expect(copied?.blob && new TextDecoder().decode(await copied.blob.arrayBuffer())).toBe('42\n')
    await db.close()
  })
})

describe('no statement ends the engine', () => {
  let db: PGlite
  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec(`create table kept (id int primary key, v text); insert into kept select g, md5(g::text) from generate_series(1, 500) g`)
  })
  afterAll(async () => {
    await db.close()
  })
  const intact = async (): Promise<void> => {
    expect(db.closed).toBe(false)
    const { rows } = await db.query<{ n: number; s: string }>(`select count(*)::int as n, md5(string_agg(v, ',' order by id)) as s from kept`)
    const { rows: want } = await db.query<{ s: string }>(`select md5(string_agg(md5(g::text), ',' order by g)) as s from generate_series(1, 500) g`)
    expect(rows).toEqual([{ n: 500, s: want[0]!.s }])
  }

  it('exit_on_error cannot be turned on, by SET or by set_config()', async () => {
    for (const sql of [`set exit_on_error = on`, `select set_config('exit_on_error', 'on', false)`, `set exit_on_error = 1`]) {
      const err = await rejection(db.exec(sql))
      expect(err.code).toBe('22023')
      expect(err.detail).toContain('exit_on_error')
    }
    expect((await rejection(db.exec('select 1/0'))).code).toBe('22012')
    await intact()
  })

  it.each([
    ['a recursive SQL function', `create or replace function f(int) returns int language sql as $$ select f($1 + 1) $$`, 'select f(1)'],
    ['a recursive PL/pgSQL function', `create or replace function g(n int) returns int language plpgsql as $$ begin return g(n + 1); end $$`, 'select g(1)'],
    ['10,000 nested jsonb arrays', 'select 1', `select '${'['.repeat(10000)}${']'.repeat(10000)}'::jsonb`],
    ['a deeply nested regular expression', 'select 1', `select 'a' ~ '${'('.repeat(5000)}a${')'.repeat(5000)}'`],
  ])('%s gives 54001 stack depth limit exceeded, and the session goes on', async (_name, setup, attack) => {
    await db.exec(setup)
    const err = await rejection(db.exec(attack))
    expect(err.code).toBe('54001')
    expect(err.message).toBe('stack depth limit exceeded')
    await intact()
    // Inside a transaction block: the error aborts it as any ERROR does, and it rolls back.
    await db.exec('begin; insert into kept values (1000, $$x$$)')
    expect((await rejection(db.exec(attack))).code).toBe('54001')
    expect((await rejection(db.exec('select 1'))).code).toBe('25P02')
    await db.exec('rollback')
    await intact()
  })

  it('an internal or C function declared with types its symbol does not take is refused (42P13), however the CREATE is written', async () => {
    const other = await PGlite.create({ extensions: { pg_trgm, citext } })
    try {
      await other.exec('create extension pg_trgm; create extension citext')
      // Each ended the engine at its first call (textout read -8 as a pointer).
      const attacks = [
        [`create function f(int4) returns text language internal strict as 'textout'`, 'select f(-8)'],
        [`do $$ begin execute format('create function %I(int4) returns text language %s strict as %L', 'f', 'INTERNAL', 'textout'); end $$`, 'select f(-8)'],
        [`create or replace procedure p(int8) language "internal" as 'textout'`, 'call p(8)'],
        [`create function f(text) returns int4 language internal as 'textout'`, `select f('x')`],
        [`create function g(int4) returns text[] language c strict as '$libdir/pg_trgm', 'show_trgm'`, 'select g(8)'],
        [`create function g(text) returns int8 language c strict as '$libdir/pg_trgm', 'show_trgm'`, `select g('ab')`],
      ]
      for (const [create, call] of attacks) {
        const err = await rejection(other.exec(create!))
        expect(err.code, create).toBe('42P13')
        expect(err.message).toMatch(/^function [fgp]\(\w+\) as '(textout|show_trgm)' is not declared as the function it names$/)
        expect((await rejection(other.exec(call!))).code, call).toBe('42883')
      }
      // Stored as the symbol's own types: wrappers, a binary-compatible type, a polymorphic or variadic "any" argument.
      await other.exec(`
        create function up(text) returns text language internal immutable strict as 'upper';
        create function low(varchar) returns text language internal strict as 'lower';
        create function nulls(int4, text, int8) returns int4 language internal as 'pg_num_nulls';
        create function len(int4[], int4) returns int4 language internal strict as 'array_length';
        create function trgm(citext) returns text[] language c strict as '$libdir/pg_trgm', 'show_trgm'`)
      const { rows } = await other.query(
        `select up('ab') as up, low('AB') as low, nulls(1, null, null) as nulls, len(array[1,2,3], 1) as len, trgm('Ab') as trgm, 'A'::citext = 'a' as ci`,
      )
      expect(rows).toEqual([{ up: 'AB', low: 'ab', nulls: 2, len: 3, trgm: ['  a', ' ab', 'ab '], ci: true }])
    } finally {
      await other.close()
    }
    await intact()
  })

  it('max_stack_depth cannot be raised past the engine stack', async () => {
    const err = await rejection(db.exec(`set max_stack_depth = '100MB'`))
    expect(err.code).toBe('22023')
    await db.exec(`set max_stack_depth = '7MB'`)
    expect((await db.query<{ max_stack_depth: string }>('show max_stack_depth')).rows[0]!.max_stack_depth).toBe('7MB')
    await db.exec('reset max_stack_depth')
  })

  it('idle_in_transaction_session_timeout rolls the transaction back with 25P03 and the instance stays open', async () => {
    await db.exec(`set idle_in_transaction_session_timeout = 200`)
    await db.exec(`begin; insert into kept values (1001, 'lost')`)
    await new Promise((r) => setTimeout(r, 400))
    const err = await rejection(db.query('select 1'))
    expect(err.code).toBe('25P03')
    expect(err.message).toContain('rolled back')
    // Rolled back, not kept: the session is outside a transaction again.
    expect((await db.query<{ n: number }>(`select count(*)::int as n from kept where id = 1001`)).rows).toEqual([{ n: 0 }])
    await db.exec('reset idle_in_transaction_session_timeout')
    await intact()
  })

  it('transaction_timeout rolls back with 25P04; idle_session_timeout and a transaction that keeps working do not end anything', async () => {
    await db.exec(`set transaction_timeout = 300`)
    await db.exec('begin')
    await new Promise((r) => setTimeout(r, 400))
    expect((await rejection(db.query('select 1'))).code).toBe('25P04')
    await db.exec('reset transaction_timeout')
    await db.exec(`set idle_session_timeout = 100; set idle_in_transaction_session_timeout = 300`)
    await new Promise((r) => setTimeout(r, 250))
    await db.exec('begin')
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 100))
      await db.query('select 1')
    }
    await db.exec('commit; reset all')
    await intact()
  })
})

describe('paths outside the data directory', () => {
  it('CREATE TABLESPACE is refused, nothing is linked, and the data survives a reopen', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pgwasm-tblspc-'))
    try {
      const db = await PGlite.create(dir)
      await db.exec(`create table t (v int); insert into t values (1), (2)`)
      for (const location of ['/tmp', dir]) {
        const err = await rejection(db.exec(`create tablespace ts location '${location}'`))
        expect(err.code).toBe('0A000')
        expect(err.message).toContain('tablespaces are not supported')
      }
      // An in-place tablespace (inside pg_tblspc) too, once Postgres' own checks pass.
      await db.exec('set allow_in_place_tablespaces = on')
      expect((await rejection(db.exec(`create tablespace ts location ''`))).code).toBe('0A000')
      expect(await readdir(join(dir, 'pg_tblspc'))).toEqual([])
      await db.close()
      const again = await PGlite.create(dir)
      expect((await again.query<{ n: number }>('select count(*)::int as n from t')).rows).toEqual([{ n: 2 }])
      await again.close()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('fuzz: any setting, any value', () => {
  it('random SET and RESET of every setting in pg_settings leave the engine alive and the data intact', async () => {
    const db = await PGlite.create()
    await db.exec(`create table kept (id int primary key); insert into kept select generate_series(1, 100)`)
    type Setting = { name: string; vartype: string; enumvals: string[] | null; min_val: string | null; max_val: string | null }
    const settings = (await db.query<Setting>(`select name, vartype, enumvals, min_val, max_val from pg_settings order by name`)).rows
    const valueFor = (s: Setting): fc.Arbitrary<string> => {
      const odd = fc.constantFrom('', '-1', '0', '1', 'on', 'off', 'nonsense', '9999999999', '/tmp', '$libdir/plpgsql', "'", '1GB', '1ms')
      if (s.vartype === 'bool') return fc.oneof(fc.constantFrom('on', 'off'), odd)
      if (s.vartype === 'enum' && s.enumvals) return fc.oneof(fc.constantFrom(...s.enumvals), odd)
      if ((s.vartype === 'integer' || s.vartype === 'real') && s.min_val !== null && s.max_val !== null) {
        return fc.oneof(fc.constantFrom(s.min_val, s.max_val), fc.integer({ min: -10, max: 100000 }).map(String), odd)
      }
      return fc.oneof(fc.string({ maxLength: 12 }), odd)
    }
    const command = fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...settings).chain((s) => valueFor(s).map((v) => ({ name: s.name, value: v }))) },
      { weight: 1, arbitrary: fc.constantFrom(...settings).map((s) => ({ name: s.name, value: undefined as string | undefined })) },
    )
    let sent = 0
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 5, maxLength: 15 }), async (commands) => {
        for (const { name, value } of commands) {
          sent++
          const quoted = value === undefined ? '' : `'${value.replaceAll("'", "''")}'`
          await db.exec(value === undefined ? `reset "${name}"` : `set "${name}" = ${quoted}`).catch((err: unknown) => {
            if (!(err instanceof DatabaseError)) throw err
          })
          await db.query('select 1').catch((err: unknown) => {
            if (!(err instanceof DatabaseError)) throw err
          })
        }
        await db.exec('rollback; reset all').catch(() => {})
        expect(db.closed).toBe(false)
        expect((await db.query<{ n: number }>('select count(*)::int as n from public.kept')).rows).toEqual([{ n: 100 }])
      }),
      { numRuns: 25, seed: Number(process.env.FUZZ_SEED ?? 20261125) },
    )
    console.log(`guc fuzz: ${sent} SET/RESET commands across ${settings.length} settings`)
    expect(sent).toBeGreaterThan(100)
    await db.close()
  }, 300_000)
})
