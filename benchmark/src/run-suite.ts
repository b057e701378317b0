import { writeFileSync } from 'node:fs'
import { errorText, SuiteRun } from './harness.js'
import { SUITES, type SuiteConfig, type SuiteName, type SuiteResult } from './types.js'

/**
 * Child-process entry: runs one suite so its memory and JIT state do not
 * leak into the next, then writes its result as JSON for the CLI.
 */
export interface SuiteModule {
  /** Returns a status only when the whole suite cannot run (e.g. not built). */
  run(s: SuiteRun): Promise<void | { status: 'not built'; reason: string }>
}

const [suite, resultFile] = process.argv.slice(2) as [SuiteName, string]
if (!SUITES.includes(suite) || !resultFile) {
  console.error('usage: run-suite.ts <suite> <result.json>')
  process.exit(64)
}
const config = JSON.parse(process.env.BENCH_SUITE_CONFIG ?? '{}') as SuiteConfig
const s = new SuiteRun(suite, config)
const t0 = performance.now()
let status: SuiteResult['status'] = 'ok'
let reason: string | undefined
try {
  const mod = (await import(`./suites/${suite}.js`)) as SuiteModule
  const outcome = await mod.run(s)
  if (outcome) ({ status, reason } = outcome)
} catch (err) {
  status = 'failed'
  reason = errorText(err)
  console.error(err)
}
const result: SuiteResult = {
  suite,
  status,
  ...(reason ? { reason } : {}),
  durationMs: performance.now() - t0,
  settings: s.settings,
  notes: s.notes,
  rows: s.rows,
  ratios: s.ratios,
}
writeFileSync(resultFile, JSON.stringify(result))
// Engines and sockets may keep handles open; the result is written, so leave now.
process.exit(0)
