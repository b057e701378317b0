import { formatValue } from './harness.js'
import { isHigherBetter, type Row, type SuiteResult, type Unit } from './types.js'

/**
 * A horizontal bar chart of medians: one group per case, one bar per path
 * that ran. Linear when the values of a unit are within 20x of each other,
 * log10 otherwise (e.g. better-sqlite3 next to Postgres).
 */

const COLORS: Record<string, string> = { ours: '#2f7d4f', anchor: '#6b7fa8' }
const ROW_H = 16
const GAP = 10
const LABEL_W = 330
const BAR_W = 420
const VALUE_W = 90

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

export function chart(suite: SuiteResult): string | null {
  const rows = suite.rows.filter((r): r is Row & { summary: NonNullable<Row['summary']> } => r.status === 'ok' && r.summary !== undefined && r.summary.p50 > 0)
  if (rows.length === 0) return null
  const units = [...new Set(rows.map((r) => r.unit))]
  const scales = new Map<Unit, { log: boolean; min: number; max: number }>()
  for (const u of units) {
    const v = rows.filter((r) => r.unit === u).map((r) => r.summary.p50)
    const min = Math.min(...v)
    const max = Math.max(...v)
    scales.set(u, { log: max / min > 20, min, max })
  }
  const width = (r: (typeof rows)[number]): number => {
    const sc = scales.get(r.unit)!
    if (!sc.log) return (r.summary.p50 / sc.max) * BAR_W
    // Log bars start a decade below the smallest value so it still shows.
    const lo = Math.log10(sc.min) - 1
    return ((Math.log10(r.summary.p50) - lo) / (Math.log10(sc.max) - lo)) * BAR_W
  }
  const cases = [...new Set(rows.map((r) => r.case))]
  const parts: string[] = []
  let y = 44
  for (const c of cases) {
    const group = rows.filter((r) => r.case === c)
    parts.push(`<text x="8" y="${y + 12}" class="case">${esc(c)}</text>`)
    y += ROW_H + 2
    for (const r of group) {
      const w = Math.max(1, width(r))
      parts.push(
        `<text x="${LABEL_W - 8}" y="${y + 12}" class="path" text-anchor="end">${esc(r.path)}</text>`,
        `<rect x="${LABEL_W}" y="${y + 2}" width="${w.toFixed(1)}" height="${ROW_H - 4}" fill="${COLORS[r.side]}"><title>${esc(`${r.case} | ${r.path}: median ${formatValue(r.summary.p50, r.unit)}, p95 ${formatValue(r.summary.p95, r.unit)}`)}</title></rect>`,
        `<text x="${LABEL_W + w + 6}" y="${y + 12}" class="value">${esc(formatValue(r.summary.p50, r.unit))}${r.ratio !== undefined ? ` (ours/anchor ${r.ratio.toFixed(2)}x)` : ''}</text>`,
      )
      y += ROW_H
    }
    y += GAP
  }
  const scaleNote = units
    .map((u) => `${u} (${isHigherBetter(u) ? 'higher' : 'lower'} is better): ${scales.get(u)!.log ? 'log scale' : 'linear scale'}`)
    .join('; ')
  const total = LABEL_W + BAR_W + VALUE_W + 120
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${total}" height="${y + 8}" viewBox="0 0 ${total} ${y + 8}" font-family="system-ui, -apple-system, Segoe UI, sans-serif">
<style>.title{font-size:15px;font-weight:600}.note{font-size:11px;fill:#555}.case{font-size:12px;font-weight:600}.path{font-size:11px}.value{font-size:11px;fill:#333}</style>
<rect width="100%" height="100%" fill="#fff"/>
<text x="8" y="18" class="title">pgwasm benchmark: ${esc(suite.suite)} (median)</text>
<text x="8" y="34" class="note">green: pgwasm, blue: anchors. ${esc(scaleNote)}</text>
${parts.join('\n')}
</svg>
`
}
