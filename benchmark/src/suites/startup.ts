import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadOurs, loadPglite } from '../anchors.js'
import { bundleChild, runNode } from '../child.js'
import type { SuiteRun } from '../harness.js'
import type { Unit } from '../types.js'

/**
 * Start-up costs, each sample from a fresh `node` process (bundled child, no
 * TypeScript loader), alternating implementations sample by sample.
 */

export const FIRST = 'create() in memory, first in process (incl. import)'
export const LATER = 'create() in memory, later in the same process'
export const OPEN = 'create(dir) opening an existing directory'
export const CLONE = 'clone() of a database with a 1,000-row table'
export const RSS = 'peak RSS after the first create()'
export const COLD = 'create() in memory, first after install (empty cache)'
export const COLD_RSS = 'peak RSS after the first create() after install'
export const SCHEMA_DB = 'database with a 12-table schema seen before, new process (incl. import)'
export const TESTDB = 'Prisma TestDatabase.create, 12-model schema seen before, new process (incl. import)'
/** How many in-memory databases the MANY row holds open at once. */
const MANY_COUNT = 10
export const MANY = `RSS with ${MANY_COUNT} in-memory databases open`

interface Impl {
  key: 'ours' | 'pglite'
  label: string
  side: 'ours' | 'anchor'
  skip?: string
}

interface Measure {
  case: string
  unit: Unit
  samples: Map<string, number[]>
  failed: Map<string, string>
}

const CHILD_TIMEOUT = 180_000

export async function run(s: SuiteRun): Promise<void> {
  const cfg = s.config
  const samples = cfg.iterations ?? 5
  const warmup = cfg.warmup ?? 1
  const perChild = Math.min(3, samples)
  const children = Math.ceil(samples / perChild)
  Object.assign(s.settings, { samplesPerRow: samples, warmupProcesses: warmup, samplesPerChildForLaterAndClone: perChild })
  s.notes.push(
    'Every sample comes from a new node process running a bundled child (no TypeScript loader); pgwasm and PGlite alternate.',
    `"later" creates ${perChild} instances after a discarded first one in each process; clone() is timed ${perChild} times per process.`,
    'Peak RSS is the process maximum resident set (process.resourceUsage().maxRSS) after the first create() and a select 1, Node itself included.',
    `"${SCHEMA_DB}": pgwasm restores the state PGlite.createCached saved in an earlier process; PGlite runs create() and the schema's SQL (12 tables with an index each). "${TESTDB}": the same tables from a Prisma schema, restored by TestDatabase; its first process (not measured) ran the schema engine.`,
    `"${COLD}" gives each pgwasm process a new, empty PGWASM_CACHE_DIR: no template or snapshot from an earlier process (PGlite keeps no cache, so its row is its first create()).`,
    `"${MANY}": one process per sample creates ${MANY_COUNT} databases, each with a 1,000-row table, keeps them all open and reports process.memoryUsage().rss once all answered; ${Math.min(2, samples)} samples per engine.`,
  )
  const [ours, pglite] = [await loadOurs(), await loadPglite()]
  const impls: Impl[] = [
    { key: 'ours', label: 'pgwasm', side: 'ours', ...(ours.ok ? {} : { skip: ours.reason }) },
    { key: 'pglite', label: 'PGlite', side: 'anchor', ...(pglite.ok ? {} : { skip: pglite.reason }) },
  ]
  const live = impls.filter((i) => !i.skip)
  const child = await bundleChild('suites/startup-child.ts')
  const measures = new Map<string, Measure>()
  const measure = (name: string, unit: Unit = 'ms'): Measure => {
    let m = measures.get(name)
    if (!m) measures.set(name, (m = { case: name, unit, samples: new Map(), failed: new Map() }))
    return m
  }
  const spawnChild = async (impl: Impl, args: string[], into: Measure[], env?: Record<string, string>): Promise<{ samples: number[]; rssMB: number } | undefined> => {
    if (into.every((m) => m.failed.has(impl.label))) return undefined
    const out = await runNode(child, [impl.key, ...args], CHILD_TIMEOUT, env)
    const line = out.stdout.trim().split('\n').pop() ?? ''
    try {
      if (!out.ok) throw new Error('exit')
      return JSON.parse(line) as { samples: number[]; rssMB: number }
    } catch {
      const why = `child ${args[0]} exited ${out.code}: ${out.stderr.trim().split('\n').slice(-3).join(' / ').slice(0, 300)}`
      for (const m of into) m.failed.set(impl.label, why)
      return undefined
    }
  }
  const push = (m: Measure, impl: Impl, values: number[]) => {
    const list = m.samples.get(impl.label) ?? []
    list.push(...values)
    m.samples.set(impl.label, list)
  }
  const rotated = (round: number) => (round % 2 === 0 ? live : [...live].reverse())

  const work = mkdtempSync(join(tmpdir(), 'pgwasm-bench-startup-'))
  try {
    // Explicit warm-up: the first process after an install reads every asset from disk.
    for (let w = 0; w < warmup; w++) for (const impl of live) await spawnChild(impl, ['first'], [])

    if (s.wants(FIRST) || s.wants(RSS)) {
      const first = measure(FIRST)
      const rss = measure(RSS, 'MB')
      for (let i = 0; i < samples; i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, ['first'], [first, rss])
          if (r) {
            push(first, impl, r.samples)
            push(rss, impl, [r.rssMB])
          }
        }
      }
    }
    if (s.wants(COLD) || s.wants(COLD_RSS)) {
      const cold = measure(COLD)
      const rss = measure(COLD_RSS, 'MB')
      for (let i = 0; i < samples; i++) {
        for (const impl of rotated(i)) {
          // A cache folder of its own, empty: what a process sees right after `npm i` (PGlite keeps none).
          const cache = mkdtempSync(join(work, 'cache-'))
          const r = await spawnChild(impl, ['first'], [cold, rss], { PGWASM_CACHE_DIR: cache })
          rmSync(cache, { recursive: true, force: true })
          if (r) {
            push(cold, impl, r.samples)
            push(rss, impl, [r.rssMB])
          }
        }
      }
    }
    if (s.wants(SCHEMA_DB)) {
      const schema = measure(SCHEMA_DB)
      // The first process saves the schema's state (ours); the measured ones find it.
      for (const impl of live) await spawnChild(impl, ['schema'], [schema])
      for (let i = 0; i < samples; i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, ['schema'], [schema])
          if (r) push(schema, impl, r.samples)
        }
      }
    }
    if (s.wants(TESTDB)) {
      const testdb = measure(TESTDB)
      const ours = live.find((impl) => impl.key === 'ours')
      if (ours && (await spawnChild(ours, ['testdb'], [testdb]))) {
        for (let i = 0; i < samples; i++) {
          const r = await spawnChild(ours, ['testdb'], [testdb])
          if (r) push(testdb, ours, r.samples)
        }
      }
    }
    if (s.wants(LATER)) {
      const later = measure(LATER)
      for (let i = 0; i < children; i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, ['later', String(perChild)], [later])
          if (r) push(later, impl, r.samples)
        }
      }
    }
    if (s.wants(OPEN)) {
      const open = measure(OPEN)
      const dirs = new Map<string, string>()
      for (const impl of live) {
        const dir = join(work, impl.key)
        if (await spawnChild(impl, ['prepare', dir], [open])) dirs.set(impl.label, dir)
      }
      for (let i = 0; i < samples; i++) {
        for (const impl of rotated(i)) {
          const dir = dirs.get(impl.label)
          if (!dir) continue
          const r = await spawnChild(impl, ['open', dir], [open])
          if (r) push(open, impl, r.samples)
        }
      }
    }
    if (s.wants(CLONE)) {
      const clone = measure(CLONE)
      for (let i = 0; i < children; i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, ['clone', String(perChild)], [clone])
          if (r) push(clone, impl, r.samples)
        }
      }
    }
    if (s.wants(MANY)) {
      const many = measure(MANY, 'MB')
      for (let i = 0; i < Math.min(2, samples); i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, ['many', String(MANY_COUNT)], [many])
          if (r) push(many, impl, r.samples)
        }
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }

  for (const m of measures.values()) {
    if (!s.wants(m.case)) continue
    for (const impl of impls) {
      const base = { case: m.case, path: impl.label, side: impl.side, unit: m.unit, ...(impl.side === 'anchor' ? { vs: 'pgwasm' } : {}) }
      if (impl.skip) s.mark({ ...base, status: 'skipped', reason: impl.skip })
      else if (m.case === TESTDB && impl.key === 'pglite') s.mark({ ...base, status: 'skipped', reason: 'PGlite has no TestDatabase; its create() + exec of a schema is the row above' })
      else if (m.failed.has(impl.label)) s.mark({ ...base, status: 'failed', reason: m.failed.get(impl.label)! })
      else s.add({ ...base, samples: m.samples.get(impl.label) ?? [] })
    }
  }
  s.ratio('create() later in process: pgwasm / PGlite', { case: LATER, path: 'pgwasm' }, { case: LATER, path: 'PGlite' })
  s.ratio('create() first in process: pgwasm / PGlite', { case: FIRST, path: 'pgwasm' }, { case: FIRST, path: 'PGlite' })
  s.ratio('peak RSS: pgwasm / PGlite', { case: RSS, path: 'pgwasm' }, { case: RSS, path: 'PGlite' })
  s.ratio('create() first after install: pgwasm / PGlite', { case: COLD, path: 'pgwasm' }, { case: COLD, path: 'PGlite' })
  s.ratio('create() first after install / warm first in process (pgwasm)', { case: COLD, path: 'pgwasm' }, { case: FIRST, path: 'pgwasm' })
  s.ratio('schema seen before, new process: pgwasm / PGlite', { case: SCHEMA_DB, path: 'pgwasm' }, { case: SCHEMA_DB, path: 'PGlite' })
  s.ratio('peak RSS after install: pgwasm / PGlite', { case: COLD_RSS, path: 'pgwasm' }, { case: COLD_RSS, path: 'PGlite' })
  s.ratio(`RSS with ${MANY_COUNT} databases open: pgwasm / PGlite`, { case: MANY, path: 'pgwasm' }, { case: MANY, path: 'PGlite' })
}
