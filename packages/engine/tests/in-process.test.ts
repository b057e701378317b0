// The in-process engine (lib/postgres.mjs): the backend loaded into this
// Node process, its cluster in the module's memory, answering the wire
// protocol one request at a time, as node-postgres' own serializer and
// parser speak it. Skips without a built engine, except under CI=true.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { Worker } from 'node:worker_threads'
import { dirname, join } from 'node:path'
import { isCI } from '@pgwasm/test-support/required-tools'
import { serialize } from 'pg-protocol'
import type { BackendMessage, DataRowMessage, ReadyForQueryMessage } from 'pg-protocol/dist/messages.js'
import { Parser } from 'pg-protocol/dist/parser.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { InProcessBackend } from '../src/in-process.js'
import { engineKey, findBuiltEngine, initCluster } from '../src/index.js'

const engine = findBuiltEngine()
if (!engine && isCI()) {
  throw new Error(`the engine ${engineKey()} is not built; .ci/run builds it with \`pnpm engine\` before the tests`)
}

function messages(bytes: Uint8Array): BackendMessage[] {
  const out: BackendMessage[] = []
  new Parser().parse(Buffer.from(bytes), (message) => out.push(message))
  return out
}

function join2(...parts: Buffer[]): Uint8Array {
  return Buffer.concat(parts)
}

const names = (list: BackendMessage[]) => list.map((message) => message.name)
const rows = (list: BackendMessage[]) => list.filter((m): m is DataRowMessage => m.name === 'dataRow').map((m) => m.fields)
const status = (list: BackendMessage[]) => (list.at(-1) as ReadyForQueryMessage).status
const errors = (list: BackendMessage[]) => list.filter((m) => m.name === 'error') as Array<BackendMessage & { code?: string; message: string }>

describe.skipIf(!engine)('the in-process engine', () => {
  let clusterDir = ''
  let backend: InProcessBackend

  const query = (sql: string) => messages(backend.exec(serialize.query(sql)))

  beforeAll(async () => {
    clusterDir = join(mkdtempSync(join(tmpdir(), 'pgwasm-in-process-')), 'data')
    const init = initCluster(engine!, clusterDir)
    expect(init.status, init.stderr).toBe(0)
    backend = await InProcessBackend.start(engine!, clusterDir)
  }, 300_000)

  afterAll(() => {
    backend?.close()
    if (clusterDir) rmSync(dirname(clusterDir), { recursive: true, force: true })
  })

  it('greets as a server does: parameters, a cancel key, ReadyForQuery', () => {
    const greeting = messages(backend.greeting)
    const parameters = Object.fromEntries(
      greeting.filter((m) => m.name === 'parameterStatus').map((m) => [(m as unknown as { parameterName: string }).parameterName, (m as unknown as { parameterValue: string }).parameterValue]),
    )
    expect(parameters.server_version).toBe(engine!.info.postgresql)
    expect(parameters.server_encoding).toBe('UTF8')
    expect(parameters.client_encoding).toBe('UTF8')
    expect(names(greeting)).toContain('backendKeyData')
    expect(names(greeting).at(-1)).toBe('readyForQuery')
    expect(status(greeting)).toBe('I')
  })

  it('answers a simple query with a row description, rows and a command tag', () => {
    const answer = query('select 40 + 2 as answer, version() as v')
    expect(names(answer)).toEqual(['rowDescription', 'dataRow', 'commandComplete', 'readyForQuery'])
    expect(rows(answer)[0]![0]).toBe('42')
    expect(rows(answer)[0]![1]).toContain(`PostgreSQL ${engine!.info.postgresql} on wasm32-unknown-emscripten`)
  })

  it('reports an ERROR with its SQLSTATE and goes on', () => {
    const failed = query('select 1/0')
    expect(errors(failed).map((e) => e.code)).toEqual(['22012'])
    expect(status(failed)).toBe('I')
    expect(rows(query('select 7'))).toEqual([['7']])
  })

  it('keeps a transaction across requests, marks it failed after an error, and rolls it back', () => {
    expect(status(query('begin; create table t (id int primary key, name text); insert into t values (1, $$one$$)'))).toBe('T')
    expect(backend.inTransactionBlock).toBe(true)
    expect(rows(query('select name from t'))).toEqual([['one']])
    const duplicate = query('insert into t values (1, $$again$$)')
    expect(errors(duplicate).map((e) => e.code)).toEqual(['23505'])
    expect(status(duplicate)).toBe('E')
    expect(errors(query('select 1')).map((e) => e.code)).toEqual(['25P02'])
    expect(status(query('rollback'))).toBe('I')
    expect(errors(query('select * from t')).map((e) => e.code)).toEqual(['42P01'])
  })

  it('runs the extended protocol with parameters, and skips to Sync after an error', () => {
    query('create table items (id int primary key, label text)')
    const insert = join2(
      serialize.parse({ name: 'ins', text: 'insert into items values ($1, $2) returning id * 10', types: [23, 25] }),
      serialize.bind({ statement: 'ins', values: ['1', 'first'] }),
      serialize.describe({ type: 'P' }),
      serialize.execute({}),
      serialize.bind({ statement: 'ins', values: ['2', 'second'] }),
      serialize.execute({}),
      serialize.sync(),
    )
    const inserted = messages(backend.exec(insert))
    expect(names(inserted)).toEqual(['parseComplete', 'bindComplete', 'rowDescription', 'dataRow', 'commandComplete', 'bindComplete', 'dataRow', 'commandComplete', 'readyForQuery'])
    expect(rows(inserted)).toEqual([['10'], ['20']])

    // The duplicate fails; the Bind/Execute after it are skipped up to Sync, and the whole batch is one implicit transaction.
    const failing = join2(
      serialize.bind({ statement: 'ins', values: ['3', 'third'] }),
      serialize.execute({}),
      serialize.bind({ statement: 'ins', values: ['1', 'duplicate'] }),
      serialize.execute({}),
      serialize.bind({ statement: 'ins', values: ['4', 'fourth'] }),
      serialize.execute({}),
      serialize.sync(),
    )
    const failed = messages(backend.exec(failing))
    expect(names(failed)).toEqual(['bindComplete', 'dataRow', 'commandComplete', 'bindComplete', 'error', 'readyForQuery'])
    expect(status(failed)).toBe('I')
    expect(rows(query('select id, label from items order by id'))).toEqual([
      ['1', 'first'],
      ['2', 'second'],
    ])
    // The named statement outlives the error; Close drops it.
    const closed = messages(backend.exec(join2(serialize.close({ type: 'S', name: 'ins' }), serialize.sync())))
    expect(names(closed)).toEqual(['closeComplete', 'readyForQuery'])
    expect(rows(query('select count(*) from pg_prepared_statements'))).toEqual([['0']])
  })

  it('takes COPY FROM STDIN data sent with the request, and fails a COPY whose data does not come', () => {
    query('create table copied (n int, word text)')
    const copy = join2(serialize.query('copy copied from stdin'), serialize.copyData(Buffer.from('1\tone\n2\ttwo\n')), serialize.copyDone())
    const done = messages(backend.exec(copy))
    expect(names(done)).toEqual(['copyInResponse', 'commandComplete', 'readyForQuery'])
    expect(rows(query('select sum(n), string_agg(word, $$,$$ order by n) from copied'))).toEqual([['3', 'one,two']])

    const starved = messages(backend.exec(serialize.query('copy copied from stdin')))
    expect(errors(starved).map((e) => e.code)).toEqual(['57014'])
    expect(status(starved)).toBe('I')
    expect(rows(query('select count(*) from copied'))).toEqual([['2']])
  })

  it('loads PL/pgSQL as a side module and catches errors inside it (setjmp/longjmp in wasm)', () => {
    const created = query(`create function safe_div(a int, b int) returns int language plpgsql as $$
      begin return a / b; exception when division_by_zero then return -1; end $$`)
    expect(errors(created)).toEqual([])
    expect(rows(query('select safe_div(10, 2), safe_div(1, 0), (select sum(safe_div(i, i % 3)) from generate_series(1, 3000) i)'))).toEqual([
      ['5', '-1', String(sumOfSafeDivs(3000))],
    ])
  })

  it('loads a text search dictionary (snowball) as a side module', () => {
    expect(rows(query("select to_tsvector('english', 'the running dogs')"))).toEqual([["'dog':3 'run':2"]])
  })

  it("converts to a client's encoding with PostgreSQL's own conversion modules", () => {
    expect(rows(query("select convert_to('été', 'LATIN1')::text, convert_to('ж', 'WIN1251')::text"))).toEqual([['\\xe974e9', '\\xe6']])
  })

  it('creates contrib extensions and uses them', () => {
    const created = query(
      ['pg_trgm', 'hstore', 'citext', 'ltree', 'cube', 'earthdistance', 'fuzzystrmatch', 'intarray', 'btree_gist', 'tablefunc', 'unaccent']
        .map((name) => `create extension ${name}`)
        .join(';'),
    )
    expect(errors(created)).toEqual([])
    expect(
      rows(
        query(`select similarity('postgres', 'postgrex')::numeric(4,3), ('a=>1'::hstore)->'a', 'ABC'::citext = 'abc',
          'top.a.b'::ltree <@ 'top.a', levenshtein('kitten', 'sitting'), (earth_distance(ll_to_earth(0, 0), ll_to_earth(0, 1)) / 1000)::int,
          array[1,2,3] & array[2,3,4], unaccent('Ångström')`),
      ),
    ).toEqual([['0.636', '1', 't', 't', '3', '111', '{2,3}', 'Angstrom']])
  })

  it('decodes changes from a logical replication slot, with test_decoding and with pgoutput', async () => {
    const other = await InProcessBackend.start(engine!, clusterDir, { settings: { wal_level: 'logical', max_replication_slots: '4', max_wal_senders: '4' } })
    try {
      const run = (sql: string) => messages(other.exec(serialize.query(sql)))
      // A slot is made in a transaction of its own (one that wrote nothing).
      for (const sql of [
        'create table decoded (id int primary key, v text); create publication pub for table decoded',
        "select pg_create_logical_replication_slot('td', 'test_decoding')",
        "select pg_create_logical_replication_slot('po', 'pgoutput')",
      ]) {
        expect(errors(run(sql))).toEqual([])
      }
      run("insert into decoded values (1, 'one')")
      expect(rows(run("select data from pg_logical_slot_get_changes('td', null, null)")).map((r) => r[0])).toEqual([
        expect.stringMatching(/^BEGIN/),
        "table public.decoded: INSERT: id[integer]:1 v[text]:'one'",
        expect.stringMatching(/^COMMIT/),
      ])
      // pgoutput's binary protocol: a logical message sent through it comes back as Begin, Message ('M', with its text), Commit.
      run("select pg_logical_emit_message(true, 'pgwasm', 'hello')")
      const decoded = rows(
        run("select substr(data, 1, 1), position('hello'::bytea in data) > 0 from pg_logical_slot_get_binary_changes('po', null, null, 'proto_version', '1', 'publication_names', 'pub', 'messages', 'true')"),
      )
      expect(decoded.filter((r) => r[0] === '\\x4d')).toEqual([['\\x4d', 't']])
      expect(decoded.at(0)?.[0]).toBe('\\x42')
      expect(decoded.at(-1)?.[0]).toBe('\\x43')
    } finally {
      other.close()
    }
  }, 60_000)

  it('exports what the host and the side modules use, not every symbol', () => {
    const exportsOf = (file: string) => new Set(WebAssembly.Module.exports(new WebAssembly.Module(readFileSync(file))).map((e) => e.name))
    const ours = exportsOf(join(engine!.dir, 'lib', 'postgres.wasm'))
    const program = exportsOf(join(engine!.dir, 'bin', 'postgres.wasm'))
    expect(ours.size * 10).toBeLessThan(program.size)
    const libDir = join(engine!.dir, 'lib', 'postgresql')
    const sides = readdirSync(libDir).filter((f) => f.endsWith('.so'))
    expect(sides.length).toBeGreaterThan(0)
    const definedBySides = new Set(sides.flatMap((f) => [...exportsOf(join(libDir, f))]))
    const missing = sides.flatMap((f) =>
      WebAssembly.Module.imports(new WebAssembly.Module(readFileSync(join(libDir, f))))
        .filter((i) => (i.module === 'GOT.mem' || i.module === 'GOT.func' || (i.module === 'env' && i.kind === 'function')) && !definedBySides.has(i.name))
        .filter((i) => !ours.has(i.name))
        .map((i) => `${f}: ${i.module}.${i.name}`),
    )
    expect(missing).toEqual([])
  })

  it('reports changed settings with ParameterStatus, as a server does', () => {
    const changed = messages(backend.exec(serialize.query("set application_name = 'in-process test'")))
    const reported = changed.find((m) => m.name === 'parameterStatus') as unknown as { parameterName: string; parameterValue: string }
    expect(reported).toMatchObject({ parameterName: 'application_name', parameterValue: 'in-process test' })
  })

  it('stops a statement at statement_timeout, computing or waiting (the checks poll the host)', () => {
    query("set statement_timeout = '300ms'")
    const endless = query('do $$ begin loop end loop; end $$')
    expect(errors(endless).map((e) => [e.code, e.message])).toEqual([['57014', 'canceling statement due to statement timeout']])
    const sleeping = query('select pg_sleep(3600)')
    expect(errors(sleeping).map((e) => e.code)).toEqual(['57014'])
    const counting = query('select count(*) from generate_series(1, 1000000000)')
    expect(errors(counting).map((e) => e.code)).toEqual(['57014'])
    query('reset statement_timeout')
    expect(rows(query('select 5'))).toEqual([['5']])
  }, 60_000)

  it('sleeps in a latch wait instead of spinning (pg_sleep takes its time, not the CPU)', () => {
    const cpu = process.cpuUsage()
    const wall = performance.now()
    expect(errors(query('select pg_sleep(1)'))).toEqual([])
    const used = process.cpuUsage(cpu)
    const waited = performance.now() - wall
    expect(waited).toBeGreaterThanOrEqual(990)
    // Spinning, the process used about as much CPU as the wait took.
    expect((used.user + used.system) / 1000).toBeLessThan(waited / 2)
  }, 60_000)

  it('takes a cancel from another thread while a statement runs on this one', async () => {
    const flag = new Int32Array(new SharedArrayBuffer(4))
    const other = await InProcessBackend.start(engine!, clusterDir, { cancel: flag })
    try {
      // The worker cannot call into the engine; it only stores the flag the engine polls.
      const worker = new Worker('const { workerData } = require("node:worker_threads"); setTimeout(() => Atomics.store(workerData, 0, 1), 300)', { eval: true, workerData: flag })
      const canceled = messages(other.exec(serialize.query('do $$ begin loop end loop; end $$')))
      await worker.terminate()
      expect(errors(canceled).map((e) => [e.code, e.message])).toEqual([['57014', 'canceling statement due to user request']])
      expect(Atomics.load(flag, 0)).toBe(0)
      expect(rows(messages(other.exec(serialize.query('select 6'))))).toEqual([['6']])
    } finally {
      other.close()
    }
  }, 60_000)

  it("ends a wait for a prepared transaction's lock at lock_timeout", async () => {
    const other = await InProcessBackend.start(engine!, clusterDir, { settings: { max_prepared_transactions: '2' } })
    try {
      const run = (sql: string) => messages(other.exec(serialize.query(sql)))
      run('create table lk (id int primary key)')
      expect(errors(run("begin; insert into lk values (1); prepare transaction 'held'"))).toEqual([])
      run("set lock_timeout = '300ms'")
      expect(errors(run('insert into lk values (1)')).map((e) => e.code)).toEqual(['55P03'])
      run("rollback prepared 'held'")
      expect(errors(run('insert into lk values (1)'))).toEqual([])
    } finally {
      other.close()
    }
  }, 60_000)

  it('ends the session with a FATAL on a message type it does not know, and then refuses requests', async () => {
    const other = await InProcessBackend.start(engine!, clusterDir)
    expect(rows(messages(other.exec(serialize.query('select 1'))))).toEqual([['1']])
    expect(() => other.exec(Uint8Array.of(0x7a, 0, 0, 0, 4))).toThrow(/exited with status 1[^]*invalid frontend message type 122/)
    expect(() => other.exec(serialize.query('select 1'))).toThrow(/has ended/)
  }, 60_000)
})

function sumOfSafeDivs(n: number): number {
  let sum = 0
  for (let i = 1; i <= n; i++) sum += i % 3 === 0 ? -1 : Math.trunc(i / (i % 3))
  return sum
}
