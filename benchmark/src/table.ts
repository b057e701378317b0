import { formatValue } from './harness.js'
import type { KeyRatio, Row, SuiteResult } from './types.js'

export function formatRatio(r: number | undefined): string {
  if (r === undefined || !Number.isFinite(r)) return ''
  return `${r >= 10 ? r.toFixed(1) : r.toFixed(2)}x`
}

/** ours/anchor per anchor row, and the suite's named ratios, from rows of the same run. */
export function computeRatios(suite: SuiteResult): void {
  const find = (c: string, p: string): Row | undefined => suite.rows.find((r) => r.case === c && r.path === p)
  for (const row of suite.rows) {
    if (row.side !== 'anchor' || !row.vs || row.status !== 'ok') continue
    const ours = find(row.case, row.vs)
    if (ours?.status === 'ok' && ours.summary && row.summary && row.summary.p50 > 0) row.ratio = ours.summary.p50 / row.summary.p50
  }
  for (const k of suite.ratios) {
    const a = find(k.numerator.case, k.numerator.path)
    const b = find(k.denominator.case, k.denominator.path)
    delete k.value
    delete k.reason
    if (!a || !b) k.reason = 'row not run (filtered out)'
    else if (a.status !== 'ok') k.reason = `${a.path}: ${a.status}${a.reason ? ` (${a.reason})` : ''}`
    else if (b.status !== 'ok') k.reason = `${b.path}: ${b.status}${b.reason ? ` (${b.reason})` : ''}`
    else if (a.summary && b.summary && b.summary.p50 > 0) k.value = a.summary.p50 / b.summary.p50
  }
}

const HEAD = ['Case', 'Path', 'Median', 'p95', 'p99', 'Trimmed mean', 'n', 'ours/anchor']

function cells(row: Row, first: boolean): string[] {
  const c = first ? row.case : ''
  // The reason goes last so a long one does not widen the number columns.
  if (row.status !== 'ok' || !row.summary) return [c, row.path, row.status, '', '', '', '', row.reason ?? '']
  const s = row.summary
  const ratio = row.ratio === undefined ? '' : `${formatRatio(row.ratio)} (${row.vs})`
  return [c, row.path, formatValue(s.p50, row.unit), formatValue(s.p95, row.unit), formatValue(s.p99, row.unit), formatValue(s.trimmedMean, row.unit), String(s.n), ratio]
}

function bodyRows(suite: SuiteResult): string[][] {
  const out: string[][] = []
  let last = ''
  for (const row of suite.rows) {
    out.push(cells(row, row.case !== last))
    last = row.case
  }
  return out
}

function ratioLine(k: KeyRatio): string {
  return k.value !== undefined ? `${k.name}: ${formatRatio(k.value)}` : `${k.name}: n/a (${k.reason ?? 'not computed'})`
}

/** A plain-text table for stdout. Skipped and not-built rows carry their reason in the Median column. */
export function renderText(suite: SuiteResult): string {
  const lines: string[] = []
  lines.push(`== ${suite.suite} ==${suite.status !== 'ok' ? ` ${suite.status}: ${suite.reason ?? ''}` : ''}`)
  const body = bodyRows(suite)
  if (body.length > 0) {
    const widths = HEAD.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)))
    const fmt = (r: string[]) =>
      r
        .map((c, i) => (i >= 2 && i <= 6 && /^[\d.]/.test(c) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd()
    lines.push(fmt(HEAD), widths.map((w) => '-'.repeat(w)).join('  '))
    for (const r of body) lines.push(fmt(r))
  }
  if (suite.ratios.length > 0) {
    lines.push('', 'Key ratios (medians; < 1 means pgwasm takes less time, > 1 on q/s and tps rows means it serves more):')
    for (const k of suite.ratios) lines.push(`  ${ratioLine(k)}`)
  }
  for (const n of suite.notes) lines.push(`note: ${n}`)
  lines.push(`(${(suite.durationMs / 1000).toFixed(1)} s)`, '')
  return lines.join('\n')
}

const mdEscape = (s: string) => s.replace(/\|/g, '\\|')

export function renderMarkdown(suite: SuiteResult): string {
  const lines: string[] = []
  if (suite.status !== 'ok') lines.push(`**${suite.status}**: ${suite.reason ?? ''}`, '')
  const body = bodyRows(suite)
  if (body.length > 0) {
    lines.push(`| ${HEAD.join(' | ')} |`, `| ${HEAD.map((_, i) => (i >= 2 && i <= 7 ? '---:' : '---')).join(' | ')} |`)
    for (const r of body) lines.push(`| ${r.map(mdEscape).join(' | ')} |`)
    lines.push('')
  }
  if (suite.ratios.length > 0) {
    lines.push('Key ratios (medians of the same run; below 1 means pgwasm takes less time, above 1 on queries/s and tps rows means it serves more):', '')
    for (const k of suite.ratios) lines.push(`- ${mdEscape(ratioLine(k))}`)
    lines.push('')
  }
  for (const n of suite.notes) lines.push(`> ${n}`, '>')
  if (suite.notes.length > 0) lines.pop()
  return lines.join('\n')
}
