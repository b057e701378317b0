import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { PGlite as UpstreamPGlite } from '@electric-sql/pglite'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { findNativePostgres, startNativePostgres, type NativeServer } from '@pgwasm/test-support/native-postgres'
import { tempDir as makeTempDir } from '@pgwasm/test-support/temp-dirs'
import { EngineError, PGlite } from '../src/index.js'
import { live } from '../src/live.js'

const run = promisify(execFile)
const packageDir = fileURLToPath(new URL('..', import.meta.url))
const tempDir = (): string => makeTempDir('pgwasm-dump-')

async function bytesOf(blob: Blob): Promise<Uint8Array> {
  return new Uint8Array(await blob.arrayBuffer())
}

async function count(db: PGlite, table: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from ${table}`)
  return rows[0]!.n
}

/** A small database with data, made once: most tests only read its dump. */
let source: PGlite
let gzipDump: File | Blob

beforeAll(async () => {
  source = await PGlite.create()
  await source.exec(`
    create table t (id int primary key, v text);
    insert into t select g, 'row ' || g from generate_series(1, 500) g;
  `)
  gzipDump = await source.dumpDataDir()
})

afterAll(async () => {
  await source?.close()
})

describe('dumpDataDir', () => {
  it('returns a gzip File named pgdata.tar.gz for an in-memory database', async () => {
    expect(gzipDump).toBeInstanceOf(File)
    expect((gzipDump as File).name).toBe('pgdata.tar.gz')
    expect(gzipDump.type).toBe('application/x-gzip')
    const bytes = await bytesOf(gzipDump)
    expect([bytes[0], bytes[1]]).toEqual([0x1f, 0x8b])
  })

  it("returns a plain tar named after the directory with compression 'none'", async () => {
    const dir = join(tempDir(), 'mydb')
    const db = await PGlite.create(dir)
    try {
      const dump = await db.dumpDataDir('none')
      expect((dump as File).name).toBe('mydb.tar')
      expect(dump.type).toBe('application/x-tar')
      const bytes = await bytesOf(dump)
      expect(new TextDecoder().decode(bytes.subarray(257, 262))).toBe('ustar')
    } finally {
      await db.close()
    }
  })

  it('takes a CHECKPOINT before reading the files', async () => {
    const db = await PGlite.create()
    try {
      await db.exec('create table c (a int); insert into c values (1)')
      const lsn = async (): Promise<string> =>
        (await db.query<{ lsn: string }>('select checkpoint_lsn::text as lsn from pg_control_checkpoint()')).rows[0]!.lsn
      const before = await lsn()
      await db.dumpDataDir('none')
      expect(await lsn()).not.toBe(before)
    } finally {
      await db.close()
    }
  })

  it('leaves out the postmaster.pid of the running instance', async () => {
    const db = await PGlite.create()
    try {
      const { unpackTar } = await import('../src/engine/files/tar.js')
      const paths = unpackTar(await bytesOf(await db.dumpDataDir('none'))).map((e) => e.path)
      expect(paths).toContain('PG_VERSION')
      expect(paths).not.toContain('postmaster.pid')
    } finally {
      await db.close()
    }
  })
})

describe('loadDataDir', () => {
  it('opens a dump in memory with the data it had', async () => {
    const db = new PGlite({ loadDataDir: gzipDump })
    try {
      await db.waitReady
      expect(await count(db, 't')).toBe(500)
    } finally {
      await db.close()
    }
  })

  it('opens a dump through PGlite.create(undefined, { loadDataDir })', async () => {
    const db = await PGlite.create(undefined, { loadDataDir: gzipDump })
    try {
      expect((await db.query('select v from t where id = 42')).rows).toEqual([{ v: 'row 42' }])
    } finally {
      await db.close()
    }
  })

  it('recognises gzip by its bytes when given a bare Uint8Array', async () => {
    const db = await PGlite.create({ loadDataDir: await bytesOf(gzipDump) })
    try {
      expect(await count(db, 't')).toBe(500)
    } finally {
      await db.close()
    }
  })

  it('opens an uncompressed tar given as a Blob without a type', async () => {
    const plain = new Blob([await bytesOf(await source.dumpDataDir('none'))])
    const db = await PGlite.create({ loadDataDir: plain })
    try {
      expect(await count(db, 't')).toBe(500)
    } finally {
      await db.close()
    }
  })

  it('writes a dump into an empty directory, which then opens without it', async () => {
    const dir = join(tempDir(), 'loaded')
    const first = await PGlite.create(dir, { loadDataDir: gzipDump })
    await first.query("insert into t values (501, 'added')")
    await first.close()
    const again = await PGlite.create(dir)
    try {
      expect(await count(again, 't')).toBe(501)
    } finally {
      await again.close()
    }
  })

  it('refuses to load into a directory that already holds a database', async () => {
    const dir = join(tempDir(), 'taken')
    const existing = await PGlite.create(dir)
    await existing.exec('create table mine (a int)')
    await existing.close()
    const attempt = PGlite.create(dir, { loadDataDir: gzipDump })
    await expect(attempt).rejects.toBeInstanceOf(EngineError)
    await expect(attempt).rejects.toThrow(/already holds a database/)
    const reopened = await PGlite.create(dir)
    try {
      expect(await count(reopened, 'mine')).toBe(0)
    } finally {
      await reopened.close()
    }
  })

  it('refuses bytes that are not a tarball with BAD_DATA_DIR', async () => {
    const junk = new File([new Uint8Array(2048).fill(7)], 'junk.tar', { type: 'application/x-tar' })
    await expect(PGlite.create({ loadDataDir: junk })).rejects.toMatchObject({ code: 'BAD_DATA_DIR', message: expect.stringContaining('junk.tar') })
  })

  it('gives a clone of a loaded database the current data, not the tarball', async () => {
    const db = await PGlite.create({ loadDataDir: gzipDump })
    try {
      await db.query("insert into t values (900, 'after load')")
      const copy = await db.clone()
      try {
        expect(await count(copy, 't')).toBe(501)
      } finally {
        await copy.close()
      }
    } finally {
      await db.close()
    }
  })
})

describe('dumps shared with @electric-sql/pglite', () => {
  it("opens a tarball made by @electric-sql/pglite's dumpDataDir", async () => {
    const upstream = await UpstreamPGlite.create()
    let dump: File | Blob
    try {
      await upstream.exec("create table up (id int primary key, v text); insert into up select g, 'u' || g from generate_series(1, 300) g")
      dump = await upstream.dumpDataDir('gzip')
    } finally {
      await upstream.close()
    }
    const db = await PGlite.create({ loadDataDir: dump })
    try {
      expect(await count(db, 'up')).toBe(300)
    } finally {
      await db.close()
    }
  })

  it('makes a tarball that @electric-sql/pglite opens', async () => {
    const upstream = await UpstreamPGlite.create({ loadDataDir: gzipDump })
    try {
      expect((await upstream.query<{ n: number }>('select count(*)::int as n from t')).rows).toEqual([{ n: 500 }])
    } finally {
      await upstream.close()
    }
  })
})

/** The database the SQL dump tests dump: one of every kind of object the dump handles. */
const SCHEMA = `
create schema app;
create type app.mood as enum ('sad', 'ok', 'happy');
create domain app.posint as int check (value > 0);
create type app.pair as (a int, b text);
create table app.users (
  id serial primary key,
  name text not null unique,
  mood app.mood not null default 'ok',
  score app.posint,
  tags text[],
  created timestamptz not null default '2020-01-01 00:00:00+00'
);
create table app.posts (
  id bigint generated always as identity primary key,
  user_id int not null references app.users (id) on delete cascade,
  title text check (length(title) > 0),
  body text,
  amount numeric(10, 2),
  body_length int generated always as (length(body)) stored
);
create index posts_title_idx on app.posts (lower(title));
create sequence app.counter start 100;
select nextval('app.counter'), nextval('app.counter');
create function app.trim_title() returns trigger language plpgsql as $$
begin
  new.title := trim(new.title);
  return new;
end
$$;
create trigger posts_trim before insert or update on app.posts for each row execute function app.trim_title();
create function app.user_count() returns bigint language sql stable as 'select count(*) from app.users';
create view app.user_posts as
  select u.name, count(p.id) as posts, app.user_count() as users
  from app.users u left join app.posts p on p.user_id = u.id group by u.name;
create materialized view app.moods as select mood, count(*)::int as n from app.users group by mood;
create table public.kv (k text primary key, v jsonb, p app.pair, b bytea);
create table public.events (id int, at date not null, primary key (id, at)) partition by range (at);
create table public.events_2020 partition of public.events for values from ('2020-01-01') to ('2021-01-01');
create table public.events_2021 partition of public.events for values from ('2021-01-01') to ('2022-01-01');
insert into app.users (name, mood, score, tags)
  select 'user' || g, (array['sad', 'ok', 'happy'])[1 + g % 3]::app.mood, g, array['a', 'b' || g] from generate_series(1, 60) g;
insert into app.posts (user_id, title, body, amount)
  select 1 + g % 60, '  title ' || g || ' ', E'line one\\ttab\\nline two ' || g, g / 7.0 from generate_series(1, 250) g;
insert into public.kv values
  ('a', '{"x": [1, 2]}', row(1, 'one'), '\\x00ff'),
  ('b', null, null, null),
  (E'back\\\\slash', '"quoted"', row(2, null), '');
insert into public.events select g, date '2020-06-01' + g * 3 from generate_series(1, 150) g;
refresh materialized view app.moods;
comment on table app.users is 'people who post';
`

/** Each table or view with the order that makes its checksum stable. */
const CHECKED: readonly [string, string][] = [
  ['app.users', 'id'],
  ['app.posts', 'id'],
  ['app.user_posts', 'name'],
  ['app.moods', 'mood'],
  ['public.kv', 'k'],
  ['public.events', 'id, at'],
]

const checksumSql = (table: string, order: string): string =>
  `select count(*) || ':' || md5(coalesce(string_agg(t::text, E'\\n' order by ${order}), '')) as sum from ${table} t`


const found = findNativePostgres()
/** Native PostgreSQL with its psql, or undefined. */
const native = found?.psql ? { ...found, psql: found.psql } : undefined

describe('dumpSql', () => {
  let db: PGlite
  let sql: string

  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec(SCHEMA)
    sql = await db.dumpSql()
  })

  afterAll(async () => {
    await db?.close()
  })

  it('writes schema before data and constraints after it', () => {
    const at = (needle: string): number => {
      const i = sql.indexOf(needle)
      expect(i, needle).toBeGreaterThanOrEqual(0)
      return i
    }
    expect(at('CREATE TYPE app.mood AS ENUM')).toBeLessThan(at('CREATE TABLE app.users'))
    expect(at('CREATE TABLE app.users')).toBeLessThan(at('COPY app.users'))
    expect(at('CREATE OR REPLACE FUNCTION app.user_count()')).toBeLessThan(at('CREATE VIEW app.user_posts'))
    expect(at('COPY app.posts')).toBeLessThan(at('ADD CONSTRAINT posts_user_id_fkey FOREIGN KEY'))
    expect(at('ADD CONSTRAINT users_pkey PRIMARY KEY')).toBeLessThan(at('ADD CONSTRAINT posts_user_id_fkey FOREIGN KEY'))
    expect(at('COPY app.posts')).toBeLessThan(at('CREATE TRIGGER posts_trim'))
  })

  it("leaves out the triggers live queries put on the session's tables", async () => {
    const withLive = await PGlite.create({ extensions: { live } })
    try {
      await withLive.exec('create table todo (id int primary key, title text)')
      const watched = await withLive.live.query('select * from todo', [], () => {})
      const dump = await withLive.dumpSql()
      await watched.unsubscribe()
      expect(dump).toContain('CREATE TABLE public.todo (')
      expect(dump).not.toContain('pgwasm_live')
    } finally {
      await withLive.close()
    }
  })

  it('leaves the session as it was', async () => {
    const { rows } = await db.query<{ search_path: string }>('show search_path')
    expect(rows).toEqual([{ search_path: 'public' }])
    expect(db.isInTransaction()).toBe(false)
  })

  describe.skipIf(!native)(
    native ? 'loaded by psql into native PostgreSQL' : 'loaded by psql into native PostgreSQL (skipped: initdb, pg_ctl or psql not installed)',
    () => {
      let cluster: NativeServer | undefined
      let loadError: unknown

      const psql = async (...args: string[]): Promise<string> => {
        const { stdout } = await run(native!.psql, ['-X', '-h', cluster!.dir, '-p', String(cluster!.port), '-U', 'postgres', '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', ...args])
        return stdout
      }
      const nativeOne = async (query: string): Promise<string> => (await psql('-qAt', '-c', query)).trim()

      beforeAll(async () => {
        cluster = await startNativePostgres(native!)
        const file = join(cluster.dir, 'dump.sql')
        writeFileSync(file, sql)
        try {
          await psql('-q', '-f', file)
        } catch (err) {
          loadError = err
        }
      })

      afterAll(async () => {
        await cluster?.stop()
      })

      it('loads with ON_ERROR_STOP and no error', () => {
        expect(loadError).toBeUndefined()
      })

      it.each(CHECKED)('has the same rows in %s', async (table, order) => {
        const query = checksumSql(table, order)
        const ours = (await db.query<{ sum: string }>(query)).rows[0]!.sum
        expect(await nativeOne(query)).toBe(ours)
      })

      // Read without moving them on, so the tests of this block pass in any order.
      it('continues sequences and identity columns where they stopped', async () => {
        const positions = `select (select last_value || ',' || is_called from app.counter)
          || ';' || pg_sequence_last_value(pg_get_serial_sequence('app.users', 'id'))
          || ';' || pg_sequence_last_value(pg_get_serial_sequence('app.posts', 'id')) as p`
        expect(await nativeOne(positions)).toBe('101,true;60;250')
        expect((await db.query<{ p: string }>(positions)).rows[0]!.p).toBe('101,true;60;250')
      })

      // Explicit ids and rolled back: no row is left and no sequence moves on.
      it('keeps triggers, checks, foreign keys and indexes working', async () => {
        const rolledBack = (insert: string): Promise<string> => nativeOne(`begin; ${insert}; rollback`)
        expect(await rolledBack("insert into app.posts (id, user_id, title) overriding system value values (100000, 2, '  padded  ') returning title")).toBe('padded')
        await expect(rolledBack("insert into app.posts (id, user_id, title) overriding system value values (100001, 9999, 'orphan')")).rejects.toThrow(/posts_user_id_fkey/)
        await expect(rolledBack("insert into app.users (id, name, score) overriding system value values (100000, 'neg', -1)")).rejects.toThrow(/posint_check/)
        expect(await nativeOne("select count(*) from pg_indexes where indexname = 'posts_title_idx'")).toBe('1')
      })
    },
  )
})

describe('pgwasm-dump', () => {
  const cli = join(packageDir, 'src', 'dump-cli.ts')
  const runCli = (args: string[]) => run(process.execPath, ['--import', 'tsx', cli, ...args], { cwd: packageDir, maxBuffer: 64 * 1024 * 1024 })

  it('writes the SQL dump of a tarball to the file given with -o', async () => {
    const dir = tempDir()
    const tarball = join(dir, 'db.tar.gz')
    writeFileSync(tarball, await bytesOf(gzipDump))
    const out = join(dir, 'out.sql')
    await runCli([tarball, '-o', out])
    const written = readFileSync(out, 'utf8')
    expect(written).toContain('CREATE TABLE public.t (')
    expect(written).toContain('COPY public.t (id, v) FROM stdin;\n1\trow 1\n')
  })

  it('writes the SQL dump of a directory database to stdout', async () => {
    const dir = join(tempDir(), 'cli-db')
    const db = await PGlite.create(dir)
    await db.exec("create table notes (body text); insert into notes values ('hello')")
    await db.close()
    const { stdout } = await runCli([dir])
    expect(stdout).toContain('COPY public.notes (body) FROM stdin;\nhello\n\\.\n')
  })

  it('exits with status 2 and the usage when no source is given', async () => {
    await expect(runCli([])).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('usage: pgwasm-dump') })
  })
})
