/**
 * Splits a SQL script into statements, for naming the statement of a
 * migration that failed. It knows PostgreSQL's lexical forms that may hold
 * a semicolon: quoted strings ('…', E'…'), quoted identifiers, dollar quotes
 * and both comment forms (block comments nest).
 */

/** One statement of a script, with its place (character offsets, end exclusive). */
export interface ScriptStatement {
  readonly text: string
  readonly start: number
  readonly end: number
}

const DOLLAR_TAG = /^\$([A-Za-z_\u0080-\uffff][\w\u0080-\uffff]*)?\$/

/** The statements of `script`, trimmed, without empty ones. */
export function splitStatements(script: string): ScriptStatement[] {
  const out: ScriptStatement[] = []
  let start = 0
  let i = 0
  const n = script.length
  const push = (end: number): void => {
    const raw = script.slice(start, end)
    const lead = raw.length - raw.trimStart().length
    const text = raw.trim()
    if (text.length > 0 && !isOnlyComments(text)) out.push({ text, start: start + lead, end: start + lead + text.length })
  }
  while (i < n) {
    const c = script[i]!
    if (c === "'") {
      // E'…' strings take backslash escapes; standard strings only ''.
      const escapes = i > 0 && (script[i - 1] === 'E' || script[i - 1] === 'e') && !/[\w$]/.test(script[i - 2] ?? '')
      i++
      while (i < n) {
        if (escapes && script[i] === '\\') i += 2
        else if (script[i] === "'") {
          if (script[i + 1] === "'") i += 2
          else break
        } else i++
      }
      i++
    } else if (c === '"') {
      i++
      while (i < n) {
        if (script[i] === '"') {
          if (script[i + 1] === '"') i += 2
          else break
        } else i++
      }
      i++
    } else if (c === '-' && script[i + 1] === '-') {
      const eol = script.indexOf('\n', i)
      i = eol < 0 ? n : eol + 1
    } else if (c === '/' && script[i + 1] === '*') {
      let depth = 1
      i += 2
      while (i < n && depth > 0) {
        if (script[i] === '/' && script[i + 1] === '*') {
          depth++
          i += 2
        } else if (script[i] === '*' && script[i + 1] === '/') {
          depth--
          i += 2
        } else i++
      }
    } else if (c === '$' && !/[\w$]/.test(script[i - 1] ?? '')) {
      const tag = DOLLAR_TAG.exec(script.slice(i, i + 64))
      if (tag) {
        const close = script.indexOf(tag[0], i + tag[0].length)
        i = close < 0 ? n : close + tag[0].length
      } else i++
    } else if (c === ';') {
      push(i)
      i++
      start = i
    } else i++
  }
  push(n)
  return out
}

function isOnlyComments(text: string): boolean {
  return text.replace(/--[^\n]*(\n|$)/g, '').replace(/\/\*[\s\S]*?\*\//g, '').trim().length === 0
}

/** The statement holding character offset `offset` (0-based), if any. */
export function statementAt(script: string, offset: number): ScriptStatement | undefined {
  const statements = splitStatements(script)
  return statements.find((s) => offset >= s.start && offset < s.end) ?? statements.find((s) => offset < s.end)
}
