import { describe, expect, it } from 'vitest'
import { splitStatements, transactionControl } from '../src/query/sql-split.js'

/** The statements' texts, as the server would run them. */
function texts(sql: string): string[] {
  return splitStatements(sql).map((s) => sql.slice(s.start, s.end))
}

describe('splitStatements', () => {
  it('splits on top-level semicolons and drops empty statements and lone comments', () => {
    expect(texts('select 1; ;; select 2 ;\n-- only a comment\n;/* and another */')).toEqual(['select 1', 'select 2'])
  })

  it('keeps semicolons inside standard strings, doubled quotes included', () => {
    expect(texts("select 'a;''b'; select 2")).toEqual(["select 'a;''b'", 'select 2'])
  })

  it("keeps semicolons inside E'' strings with backslash-escaped quotes", () => {
    expect(texts("select E'\\';' ; select e'\\\\'; select 3")).toEqual(["select E'\\';'", "select e'\\\\'", 'select 3'])
  })

  it("treats a backslash in a standard string as a plain character", () => {
    expect(texts("select 'a\\'; select 2")).toEqual(["select 'a\\'", 'select 2'])
  })

  it('keeps semicolons inside quoted identifiers and U& forms', () => {
    expect(texts(`select 1 as "a;""b"; select U&'\\0041;' , u&"x;y"; select 3`)).toEqual([
      'select 1 as "a;""b"',
      `select U&'\\0041;' , u&"x;y"`,
      'select 3',
    ])
  })

  it('keeps semicolons inside dollar quotes, tagged or not, and tells $1 apart', () => {
    expect(texts('select $$;$$, $fn$ $$; $fn$; select $1; select a$b$c from t')).toEqual([
      'select $$;$$, $fn$ $$; $fn$',
      'select $1',
      'select a$b$c from t',
    ])
  })

  it('skips line comments and nested block comments', () => {
    expect(texts('select 1 -- ; not here\n; /* a /* b; */ c; */ select 2')).toEqual(['select 1', 'select 2'])
  })

  it("keeps a CREATE RULE's parenthesized action list together", () => {
    const rule = 'create rule r as on insert to t do also (insert into a values (1); insert into b values (2))'
    expect(texts(`${rule}; select 1`)).toEqual([rule, 'select 1'])
  })

  it('keeps a BEGIN ATOMIC function body, CASE ... END inside it included, together', () => {
    const fn =
      'create or replace function f() returns int language sql begin atomic select case when true then 1 end; select 2; end'
    expect(texts(`${fn}; begin; select 3`)).toEqual([fn, 'begin', 'select 3'])
  })

  it('reports offsets into the original string, multibyte text included', () => {
    const sql = "select 'é😀'; copy t from stdin"
    const [, copy] = splitStatements(sql)
    expect(sql.slice(copy!.start, copy!.end)).toBe('copy t from stdin')
  })

  it('ends at an unterminated string or comment without throwing', () => {
    expect(texts("select 'open; select 2")).toEqual(["select 'open; select 2"])
    expect(texts('select 1 /* open; select 2')).toEqual(['select 1'])
  })
})

describe('COPY FROM STDIN detection', () => {
  const copies = (sql: string): boolean[] => splitStatements(sql).map((s) => s.copiesFromClient)

  it('finds COPY FROM STDIN with a column list, options and any case', () => {
    expect(copies('COPY t (a, b) FROM STDIN WITH (FORMAT csv); copy "T" from stdin; select 1')).toEqual([true, true, false])
  })

  it('counts COPY FROM STDOUT, which Postgres also reads from the client', () => {
    expect(copies('copy t from stdout')).toEqual([true])
  })

  it('ignores COPY TO STDOUT, FROM a file, and stdin inside a query or a string', () => {
    expect(copies("copy (select * from stdin) to stdout; copy t from 'stdin'; copy t to stdout; select 'copy t from stdin'")).toEqual([
      false,
      false,
      false,
      false,
    ])
  })
})

describe('transactionControl', () => {
  const kind = (sql: string): string | undefined => transactionControl(splitStatements(sql)[0]!.words)

  it('classifies block starts and ends', () => {
    expect(['begin', 'BEGIN ISOLATION LEVEL SERIALIZABLE', 'start transaction read only'].map(kind)).toEqual(['begin', 'begin', 'begin'])
    expect(['commit', 'end work', 'commit and no chain'].map(kind)).toEqual(['commit', 'commit', 'commit'])
    expect(['rollback', 'abort transaction'].map(kind)).toEqual(['rollback', 'rollback'])
  })

  it('classifies AND CHAIN and the savepoint forms', () => {
    expect(['commit and chain', 'rollback work and chain'].map(kind)).toEqual(['chain', 'chain'])
    expect(['savepoint a', 'release savepoint a', 'rollback to a', 'rollback transaction to savepoint a'].map(kind)).toEqual([
      'savepoint',
      'savepoint',
      'savepoint',
      'savepoint',
    ])
  })

  it('leaves two-phase commands and ordinary statements alone', () => {
    expect(["commit prepared 'x'", "rollback prepared 'x'", "prepare transaction 'x'", 'start', 'select 1'].map(kind)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ])
  })
})
