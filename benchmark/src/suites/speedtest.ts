import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connectNative, loadOurs, loadPglite, loadSqlite } from '../anchors.js'
import { bundleChild, runNode } from '../child.js'
import { errorText, type SuiteRun } from '../harness.js'
import { generateSpeedtest, sizes, WORKLOAD_NAMES } from '../speedtest-sql.js'
import { TARGETS, type TargetKey } from './speedtest-child.js'

/**
 * Whole workloads timed with performance.now() (each is far above timer
 * resolution), summarized by the same statistics code as the tinybench rows.
 * Every run is a fresh child process with a fresh database, targets taking
 * turns run by run: one engine's garbage and grown heaps cannot slow the
 * next, and an engine that corrupts process state cannot break the others.
 */

export const TOTAL = 'total (16 workloads)'

interface Target {
  key: TargetKey
  path: string
  side: 'ours' | 'anchor'
  vs?: string
  skip?: string
}

const RUN_TIMEOUT = 600_000

export async function run(s: SuiteRun): Promise<void> {
  const cfg = s.config
  const runs = cfg.iterations ?? 3
  const warmupRuns = cfg.warmup ?? 1
  const warmScale = cfg.scale / 10
  const workloads = generateSpeedtest(cfg.scale)
  Object.assign(s.settings, { scale: cfg.scale, runsPerTarget: runs, warmupRuns, warmupScale: warmScale, sizes: sizes(cfg.scale) })
  s.notes.push(
    `Sizes at scale ${cfg.scale}: ${workloads.map((w) => `${w.name.slice(0, 2)}: ${w.size}`).join('; ')}.`,
    'Same SQL on every engine, no translation needed: SQLite accepts it as written. Workload 01 sends each INSERT in its own call so each commits alone; the others are one multi-statement call each.',
    'Each run is a new process with a new empty database; targets take turns run by run. native pg is compared with pgwasm memory (the headline); better-sqlite3 and PGlite disk with pgwasm disk.',
    `Warm-up: in each process, ${warmupRuns} discarded run(s) of all 16 workloads at scale ${warmScale} on the same database (it ends with DROP TABLE) before the timed run.`,
  )

  const [ours, pglite, sqlite] = [await loadOurs(), await loadPglite(), await loadSqlite()]
  const native = await connectNative(cfg.nativeUrl, cfg.nativeReason)
  if (native.ok) await native.value.end()
  const skipOf: Record<TargetKey, string | undefined> = {
    'ours-memory': ours.ok ? undefined : ours.reason,
    'ours-disk': ours.ok ? undefined : ours.reason,
    'pglite-memory': pglite.ok ? undefined : pglite.reason,
    'pglite-disk': pglite.ok ? undefined : pglite.reason,
    'sqlite-memory': sqlite.ok ? undefined : sqlite.reason,
    'sqlite-disk': sqlite.ok ? undefined : sqlite.reason,
    native: native.ok ? undefined : native.reason,
  }
  const targets: Target[] = TARGETS.map((t) => {
    const skip = skipOf[t.key]
    return { ...t, ...(skip ? { skip } : {}) }
  })
  const child = await bundleChild('suites/speedtest-child.ts')
  const work = mkdtempSync(join(tmpdir(), 'pgwasm-bench-speedtest-'))
  const names = [...WORKLOAD_NAMES, TOTAL]
  const samples = new Map<string, number[][]>(targets.map((t) => [t.path, names.map(() => [])]))
  const failed = new Map<string, string>()
  const live = targets.filter((t) => !t.skip)
  const runOnce = async (t: Target, scale: number): Promise<number[]> => {
    const args = [t.key, String(scale), String(warmupRuns), join(work, `${t.key}-${Date.now()}`)]
    if (t.key === 'native') args.push(cfg.nativeUrl!)
    const out = await runNode(child, args, RUN_TIMEOUT)
    const line = out.stdout.trim().split('\n').pop() ?? ''
    let parsed: { times?: number[]; error?: string } = {}
    try {
      parsed = JSON.parse(line) as typeof parsed
    } catch {
      parsed = { error: `exit ${out.code}: ${out.stderr.trim().split('\n').slice(-3).join(' / ')}` }
    }
    if (parsed.error || !parsed.times) throw new Error(parsed.error ?? 'no times')
    return parsed.times
  }
  try {
    for (let r = 0; r < runs; r++) {
      for (let k = 0; k < live.length; k++) {
        const t = live[(k + r) % live.length]!
        if (failed.has(t.path)) continue
        try {
          const times = await runOnce(t, cfg.scale)
          const acc = samples.get(t.path)!
          times.forEach((ms, i) => acc[i]!.push(ms))
          acc[names.length - 1]!.push(times.reduce((x, y) => x + y, 0))
          s.progress(`run ${r + 1}/${runs} ${t.path}: ${(times.reduce((x, y) => x + y, 0) / 1000).toFixed(2)} s`)
        } catch (err) {
          failed.set(t.path, errorText(err))
        }
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  for (const [i, name] of names.entries()) {
    if (!s.wants(name) && !(name === TOTAL && s.wants('total'))) continue
    for (const t of targets) {
      const base = { case: name, path: t.path, side: t.side, unit: 'ms' as const, ...(t.vs ? { vs: t.vs } : {}) }
      if (t.skip) s.mark({ ...base, status: 'skipped', reason: t.skip })
      else if (failed.has(t.path)) s.mark({ ...base, status: 'failed', reason: failed.get(t.path)! })
      else s.add({ ...base, samples: samples.get(t.path)![i]! })
    }
  }
  s.ratio('total in memory: pgwasm / PGlite', { case: TOTAL, path: 'pgwasm memory' }, { case: TOTAL, path: 'PGlite memory' })
  s.ratio('total in memory: pgwasm / native pg', { case: TOTAL, path: 'pgwasm memory' }, { case: TOTAL, path: 'native pg' })
  s.ratio('total on disk: pgwasm / PGlite', { case: TOTAL, path: 'pgwasm disk' }, { case: TOTAL, path: 'PGlite disk' })
  s.ratio('total: pgwasm memory / better-sqlite3 memory', { case: TOTAL, path: 'pgwasm memory' }, { case: TOTAL, path: 'better-sqlite3 memory' })
}
