/**
 * Splits SQL text into its statements the way Postgres's grammar does (the
 * server runs a Query holding `COPY ... FROM STDIN` a statement at a time;
 * the Prisma schema engine names the statement of a migration that failed).
 * It knows the lexical forms that may hold a semicolon
 * (quoted strings, E'' strings, quoted identifiers, dollar quotes, nested
 * block comments, line comments) and, like psql's scanner, the semicolons
 * that do not end a statement: inside parentheses (CREATE RULE's action
 * list) and inside a `BEGIN ATOMIC ... END` function body.
 */

/** One statement of a query string. */
export interface SqlStatement {
  /** Offset of its first token (UTF-16 units). */
  readonly start: number
  /** Offset just after its last token, before the `;` that ends it. */
  readonly end: number
  /** Its first unquoted words, lower-cased (at most {@link MAX_WORDS}): `['commit', 'and', 'chain']`. */
  readonly words: readonly string[]
  /**
   * `COPY ... FROM STDIN`: the server asks the client for the data. Postgres
   * reads `FROM STDOUT` from the client as well.
   */
  readonly copiesFromClient: boolean
}

const MAX_WORDS = 5

const enum Ch {
  Tab = 0x09,
  Newline = 0x0a,
  Return = 0x0d,
  Space = 0x20,
  DoubleQuote = 0x22,
  Dollar = 0x24,
  Quote = 0x27,
  OpenParen = 0x28,
  CloseParen = 0x29,
  Star = 0x2a,
  Minus = 0x2d,
  Slash = 0x2f,
  Semicolon = 0x3b,
  Backslash = 0x5c,
  Ampersand = 0x26,
}

function isIdentStart(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || c >= 0x80
}

function isIdentPart(c: number): boolean {
  return isIdentStart(c) || (c >= 0x30 && c <= 0x39) || c === Ch.Dollar
}

function isSpace(c: number): boolean {
  return c === Ch.Space || c === Ch.Tab || c === Ch.Newline || c === Ch.Return || c === 0x0b || c === 0x0c
}

/** Per-statement state while scanning. */
class StatementScan {
  start = -1
  end = -1
  words: string[] = []
  wordsDone = false
  parenDepth = 0
  /** Depth of `BEGIN ... END` in a `CREATE FUNCTION ... BEGIN ATOMIC` body (psql's heuristic). */
  beginDepth = 0
  afterFrom = false
  copiesFromClient = false

  token(start: number, end: number): void {
    if (this.start < 0) this.start = start
    this.end = end
  }

  /** A token that is not an unquoted word ends the leading word list. */
  other(): void {
    this.wordsDone = true
    this.afterFrom = false
  }

  word(lower: string): void {
    if (!this.wordsDone && this.words.length < MAX_WORDS) this.words.push(lower)
    else this.wordsDone = true
    if (this.parenDepth > 0) {
      this.afterFrom = false
      return
    }
    if (this.words[0] === 'copy') {
      if (this.afterFrom && (lower === 'stdin' || lower === 'stdout')) this.copiesFromClient = true
      this.afterFrom = lower === 'from'
    }
    if (this.#definesRoutine()) {
      if (lower === 'begin') this.beginDepth++
      else if (lower === 'case' && this.beginDepth > 0) this.beginDepth++
      else if (lower === 'end' && this.beginDepth > 0) this.beginDepth--
    }
  }

  #definesRoutine(): boolean {
    const w = this.words
    if (w[0] !== 'create') return false
    const kind = w[1] === 'or' && w[2] === 'replace' ? w[3] : w[1]
    return kind === 'function' || kind === 'procedure'
  }
}

/**
 * The statements of `sql`, in order, without empty ones (Postgres runs
 * nothing for `;;` or a comment alone).
 */
export function splitStatements(sql: string): SqlStatement[] {
  const out: SqlStatement[] = []
  const n = sql.length
  let s = new StatementScan()
  let i = 0
  const finish = (): void => {
    if (s.start >= 0) out.push({ start: s.start, end: s.end, words: s.words, copiesFromClient: s.copiesFromClient })
    s = new StatementScan()
  }
  while (i < n) {
    const c = sql.charCodeAt(i)
    if (isSpace(c)) {
      i++
    } else if (c === Ch.Minus && sql.charCodeAt(i + 1) === Ch.Minus) {
      const eol = sql.indexOf('\n', i)
      i = eol < 0 ? n : eol + 1
    } else if (c === Ch.Slash && sql.charCodeAt(i + 1) === Ch.Star) {
      i = skipBlockComment(sql, i)
    } else if (c === Ch.Semicolon) {
      if (s.parenDepth === 0 && s.beginDepth === 0) finish()
      else s.token(i, i + 1)
      i++
    } else if (c === Ch.Quote) {
      const end = skipQuoted(sql, i, Ch.Quote, false)
      s.token(i, end)
      s.other()
      i = end
    } else if (c === Ch.DoubleQuote) {
      const end = skipQuoted(sql, i, Ch.DoubleQuote, false)
      s.token(i, end)
      s.other()
      i = end
    } else if (c === Ch.Dollar) {
      const end = skipDollar(sql, i)
      s.token(i, end)
      s.other()
      i = end
    } else if (isIdentStart(c)) {
      i = scanWord(sql, i, s)
    } else {
      if (c === Ch.OpenParen) s.parenDepth++
      else if (c === Ch.CloseParen && s.parenDepth > 0) s.parenDepth--
      s.token(i, i + 1)
      s.other()
      i++
    }
  }
  finish()
  return out
}

/** An identifier or keyword, or a string that starts with a letter prefix (E'', B'', X'', N'', U&''). */
function scanWord(sql: string, at: number, s: StatementScan): number {
  const n = sql.length
  let i = at + 1
  while (i < n && isIdentPart(sql.charCodeAt(i))) i++
  const length = i - at
  const next = sql.charCodeAt(i)
  if (length === 1 && next === Ch.Quote) {
    // E'...' takes backslash escapes; B'', X'' and N'' quote like standard strings.
    const prefix = sql.charCodeAt(at) | 0x20
    if (prefix === 0x65 /* e */ || prefix === 0x62 /* b */ || prefix === 0x78 /* x */ || prefix === 0x6e /* n */) {
      const end = skipQuoted(sql, i, Ch.Quote, prefix === 0x65)
      s.token(at, end)
      s.other()
      return end
    }
  }
  if (length === 1 && (sql.charCodeAt(at) | 0x20) === 0x75 /* u */ && next === Ch.Ampersand) {
    const quote = sql.charCodeAt(i + 1)
    if (quote === Ch.Quote || quote === Ch.DoubleQuote) {
      const end = skipQuoted(sql, i + 1, quote, false)
      s.token(at, end)
      s.other()
      return end
    }
  }
  s.token(at, i)
  s.word(sql.slice(at, i).toLowerCase())
  return i
}

/** Offset after the quoted token opened at `at`; a doubled quote stays inside. */
function skipQuoted(sql: string, at: number, quote: number, backslashEscapes: boolean): number {
  const n = sql.length
  let i = at + 1
  while (i < n) {
    const c = sql.charCodeAt(i)
    if (backslashEscapes && c === Ch.Backslash) {
      i += 2
    } else if (c === quote) {
      if (sql.charCodeAt(i + 1) !== quote) return i + 1
      i += 2
    } else {
      i++
    }
  }
  return n
}

/** Offset after a `$tag$...$tag$` string, or after a lone `$` (a parameter such as `$1`). */
function skipDollar(sql: string, at: number): number {
  const n = sql.length
  let i = at + 1
  if (i < n && isIdentStart(sql.charCodeAt(i))) {
    i++
    // A tag may not hold `$` itself.
    while (i < n && isIdentPart(sql.charCodeAt(i)) && sql.charCodeAt(i) !== Ch.Dollar) i++
  }
  if (sql.charCodeAt(i) !== Ch.Dollar) return at + 1
  const tag = sql.slice(at, i + 1)
  const close = sql.indexOf(tag, i + 1)
  return close < 0 ? n : close + tag.length
}

/** Offset after a block comment opened at `at`; Postgres lets them nest. */
function skipBlockComment(sql: string, at: number): number {
  const n = sql.length
  let depth = 1
  let i = at + 2
  while (i < n && depth > 0) {
    const c = sql.charCodeAt(i)
    if (c === Ch.Slash && sql.charCodeAt(i + 1) === Ch.Star) {
      depth++
      i += 2
    } else if (c === Ch.Star && sql.charCodeAt(i + 1) === Ch.Slash) {
      depth--
      i += 2
    } else {
      i++
    }
  }
  return i
}

/** How a statement changes the transaction block, as Postgres's `TransactionStmt` kinds group. */
export type TransactionControl = 'begin' | 'commit' | 'rollback' | 'chain' | 'savepoint'

/**
 * The transaction-control kind of a statement, from its first words:
 * `BEGIN`/`START TRANSACTION`; `COMMIT`/`END`; `ROLLBACK`/`ABORT`; either of
 * those `AND CHAIN`; `SAVEPOINT`, `RELEASE` and `ROLLBACK TO`. `COMMIT
 * PREPARED`, `ROLLBACK PREPARED` and `PREPARE TRANSACTION` are ordinary
 * statements here: they do not open or end the caller's block.
 */
export function transactionControl(words: readonly string[]): TransactionControl | undefined {
  const first = words[0]
  switch (first) {
    case 'begin':
      return 'begin'
    case 'start':
      return words[1] === 'transaction' ? 'begin' : undefined
    case 'savepoint':
    case 'release':
      return 'savepoint'
    case 'commit':
    case 'end':
    case 'rollback':
    case 'abort': {
      let at = 1
      if (words[at] === 'work' || words[at] === 'transaction') at++
      if (words[at] === 'prepared') return undefined
      if (words[at] === 'to') return 'savepoint'
      if (words[at] === 'and' && words[at + 1] === 'chain') return 'chain'
      return first === 'commit' || first === 'end' ? 'commit' : 'rollback'
    }
    default:
      return undefined
  }
}
