import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { loadOurs, loadPglite } from '../anchors.js'
import { bundleChild, runNode, runNodeIn } from '../child.js'
import type { SuiteRun } from '../harness.js'
import { BENCH_DIR, CACHE_DIR } from '../paths.js'
import { PRISMA_SCHEMA } from './prisma-schema.js'
import { serverRss } from './server-rss.js'
import type { Unit } from '../types.js'

/**
 * Start-up costs, each sample from a fresh `node` process (bundled child, no
 * TypeScript loader), alternating implementations sample by sample.
 */

export const FIRST = 'create() in memory, first in process (incl. import)'
export const LATER = 'create() in memory, later in the same process'
export const OPEN = 'create(dir) opening an existing directory'
export const OPEN_QUERY = 'create(dir) opening an existing directory, then its first query'
export const CLONE = 'clone() of a database with a 1,000-row table'
export const RSS = 'peak RSS after the first create()'
export const COLD = 'create() in memory, first after install (empty cache)'
export const COLD_RSS = 'peak RSS after the first create() after install'
export const SCHEMA_DB = 'database with a 12-table schema seen before, new process (incl. import)'
export const TESTDB = 'Prisma TestDatabase.create, 12-model schema seen before, new process (incl. import)'
export const EXT_FIRST = 'create() with 5 extensions (pg_trgm, hstore, pgcrypto, citext, vector), first in process (incl. import)'
export const EXT_LATER = 'create() with the 5 extensions, later in the same process'
export const EXT_CLONE = 'clone() of a database using the 5 extensions, with a 1,000-row table'
export const EXT_SCHEMA = 'a schema creating the 5 extensions and a table, later in the same process'
export const SCHEMA_LATER = 'a 12-table schema, later in the same process'
export const EXT_SCHEMA_DB = 'database with a schema creating the 5 extensions, seen before, new process (incl. import)'
export const TESTDB_FILES = 'Prisma TestDatabase, 5 test files x 10 tests (vitest run)'
export const TESTDB_ONE_FILE = 'Prisma TestDatabase, 1 test file x 50 tests (vitest run)'
/** The bulk-load rows: a load of `rows` rows of 1 kB into a new table (CREATE TABLE AS or COPY FROM). */
export function bulkCase(kind: 'copy' | 'ctas', rows: number): string {
  return `${kind === 'copy' ? 'COPY FROM' : 'CREATE TABLE AS'} of ${rows.toLocaleString('en-US')} rows of 1 kB`
}
/** The row counts of the bulk-load rows at `scale` (100k and 1M at scale 1). */
export function bulkRows(scale: number): number[] {
  return [100_000, 1_000_000].map((n) => Math.max(1_000, Math.round(n * scale)))
}
export const BULK_KINDS = ['copy', 'ctas'] as const
/** Past this many rows PGlite's load is not run: its in-memory file grows by a copy of the whole file, so the time grows with the square. */
const PGLITE_BULK_LIMIT = 200_000
/** The paths of the bulk rows besides pgwasm (in memory) and PGlite. */
export const BULK_DIR = 'pgwasm dir'
export const BULK_NATIVE = 'native pg'
/** COPY FROM STDIN from a client over TCP into a `pgwasm-server` process (in memory). */
export const BULK_SERVER = 'pgwasm-server, COPY FROM STDIN'
export const BULK_NATIVE_STDIN = 'native pg, COPY FROM STDIN'

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
    `"${SCHEMA_DB}": pgwasm restores the state PGlite.createCached saved in an earlier process; PGlite runs create() and the schema's SQL (12 tables with an index each). "${TESTDB}": the same tables from a Prisma schema, restored by TestDatabase; its first process (not measured) ran the schema engine. "${EXT_SCHEMA_DB}" is the same with the 5 extensions' CREATE EXTENSION and a table; "${SCHEMA_LATER}" and "${EXT_SCHEMA}" are the two schemas' createCached (PGlite: create() + the SQL) after a discarded first in the process.`,
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
  const spawnChild = async (
    impl: Impl,
    args: string[],
    into: Measure[],
    env?: Record<string, string>,
  ): Promise<{ samples: number[]; rssMB: number; withQuery?: number } | undefined> => {
    if (into.every((m) => m.failed.has(impl.label))) return undefined
    const out = await runNode(child, [impl.key, ...args], CHILD_TIMEOUT, env)
    const line = out.stdout.trim().split('\n').pop() ?? ''
    try {
      if (!out.ok) throw new Error('exit')
      return JSON.parse(line) as { samples: number[]; rssMB: number; withQuery?: number }
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
    await serverRss(s, work, Math.min(3, samples))
    for (const [name, mode] of [
      [SCHEMA_DB, 'schema'],
      [EXT_SCHEMA_DB, 'ext-schema-first'],
    ] as const) {
      if (!s.wants(name)) continue
      const schema = measure(name)
      // The first process saves the schema's state (ours); the measured ones find it.
      for (const impl of live) await spawnChild(impl, [mode], [schema])
      for (let i = 0; i < samples; i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, [mode], [schema])
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
    if (s.wants(OPEN) || s.wants(OPEN_QUERY)) {
      const open = measure(OPEN)
      const openQuery = measure(OPEN_QUERY)
      const dirs = new Map<string, string>()
      for (const impl of live) {
        const dir = join(work, impl.key)
        if (await spawnChild(impl, ['prepare', dir], [open, openQuery])) dirs.set(impl.label, dir)
      }
      for (let i = 0; i < samples; i++) {
        for (const impl of rotated(i)) {
          const dir = dirs.get(impl.label)
          if (!dir) continue
          const r = await spawnChild(impl, ['open', dir], [open, openQuery])
          if (!r) continue
          push(open, impl, r.samples)
          if (r.withQuery !== undefined) push(openQuery, impl, [r.withQuery])
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
    await testFiles(s, live, samples)
    await bulk(s, work, live, runNode.bind(null, child), samples)
    if (s.wants(EXT_FIRST)) {
      const first = measure(EXT_FIRST)
      for (let i = 0; i < samples; i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, ['ext-first'], [first])
          if (r) push(first, impl, r.samples)
        }
      }
    }
    for (const [name, mode] of [
      [EXT_LATER, 'ext-later'],
      [EXT_CLONE, 'ext-clone'],
      [EXT_SCHEMA, 'ext-schema'],
      [SCHEMA_LATER, 'schema-later'],
    ] as const) {
      if (!s.wants(name)) continue
      const m = measure(name)
      for (let i = 0; i < children; i++) {
        for (const impl of rotated(i)) {
          const r = await spawnChild(impl, [mode, String(perChild)], [m])
          if (r) push(m, impl, r.samples)
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
  s.ratio('create() with 5 extensions, later: pgwasm / PGlite (pgwasm target <= 50 ms)', { case: EXT_LATER, path: 'pgwasm' }, { case: EXT_LATER, path: 'PGlite' })
  s.ratio('clone() with 5 extensions: pgwasm / PGlite (pgwasm target <= 10 ms)', { case: EXT_CLONE, path: 'pgwasm' }, { case: EXT_CLONE, path: 'PGlite' })
  s.ratio('clone(), pgwasm: with 5 extensions / plain', { case: EXT_CLONE, path: 'pgwasm' }, { case: CLONE, path: 'pgwasm' })
  s.ratio('a schema creating 5 extensions, later: pgwasm createCached / PGlite create() + SQL (pgwasm target <= 10 ms)', { case: EXT_SCHEMA, path: 'pgwasm' }, { case: EXT_SCHEMA, path: 'PGlite' })
  s.ratio('createCached later in process, pgwasm: the schema with 5 extensions / the 12-table schema', { case: EXT_SCHEMA, path: 'pgwasm' }, { case: SCHEMA_LATER, path: 'pgwasm' })
  s.ratio('schema seen before, new process, pgwasm: with 5 extensions / 12 tables (target <= 1.2)', { case: EXT_SCHEMA_DB, path: 'pgwasm' }, { case: SCHEMA_DB, path: 'pgwasm' })
  s.ratio('schema with 5 extensions seen before, new process: pgwasm / PGlite', { case: EXT_SCHEMA_DB, path: 'pgwasm' }, { case: EXT_SCHEMA_DB, path: 'PGlite' })
  s.ratio('create() with 5 extensions, first in process: pgwasm / PGlite (pgwasm target <= 600 ms)', { case: EXT_FIRST, path: 'pgwasm' }, { case: EXT_FIRST, path: 'PGlite' })
  s.ratio('create() first in process: pgwasm / PGlite', { case: FIRST, path: 'pgwasm' }, { case: FIRST, path: 'PGlite' })
  s.ratio('peak RSS: pgwasm / PGlite', { case: RSS, path: 'pgwasm' }, { case: RSS, path: 'PGlite' })
  s.ratio('create() first after install: pgwasm / PGlite', { case: COLD, path: 'pgwasm' }, { case: COLD, path: 'PGlite' })
  s.ratio('create() first after install / warm first in process (pgwasm, target <= 1.2)', { case: COLD, path: 'pgwasm' }, { case: FIRST, path: 'pgwasm' })
  s.ratio('peak RSS after install / after a warm first create() (pgwasm, target <= 1.2)', { case: COLD_RSS, path: 'pgwasm' }, { case: RSS, path: 'pgwasm' })
  s.ratio('schema seen before, new process: pgwasm / PGlite', { case: SCHEMA_DB, path: 'pgwasm' }, { case: SCHEMA_DB, path: 'PGlite' })
  s.ratio('peak RSS after install: pgwasm / PGlite', { case: COLD_RSS, path: 'pgwasm' }, { case: COLD_RSS, path: 'PGlite' })
  s.ratio(`RSS with ${MANY_COUNT} databases open: pgwasm / PGlite`, { case: MANY, path: 'pgwasm' }, { case: MANY, path: 'PGlite' })
}

/**
 * The bulk-load rows: each sample a new process loading into a new database
 * (in memory, a new directory, or a new table on native PostgreSQL).
 */
async function bulk(
  s: SuiteRun,
  work: string,
  live: Impl[],
  spawn: (args: string[], timeoutMs: number) => ReturnType<typeof runNode>,
  samples: number,
): Promise<void> {
  const cases = BULK_KINDS.flatMap((kind) => bulkRows(s.config.scale).map((rows) => ({ kind, rows, name: bulkCase(kind, rows) }))).filter((c) => s.wants(c.name))
  if (cases.length === 0) return
  s.notes.push(
    `Bulk rows: one load per new process (not counting the start): COPY FROM of generated text (pgwasm and PGlite: a Blob through /dev/blob; native: a server-side file), or CREATE TABLE AS from generate_series, of rows of an int and 1,000 bytes. "${BULK_DIR}" loads into a new directory database; "${BULK_NATIVE}" into a new table of the native server; "${BULK_SERVER}" streams the same text in 64 kB CopyData frames over TCP to a pgwasm-server process serving an in-memory database (timed from the COPY's Query to its ReadyForQuery); "${BULK_NATIVE_STDIN}" is the same client and frames against the native server, which the "${BULK_NATIVE}" row's server-side file spares the transfer. The largest row count takes at most 2 samples. Samples are taken in rounds, one per path, so that a drift in the machine's speed reaches every path alike.`,
  )
  const ours = live.find((i) => i.key === 'ours')
  const pglite = live.find((i) => i.key === 'pglite')
  for (const c of cases) {
    const n = c.rows >= bulkRows(s.config.scale)[1]! ? Math.min(2, samples) : samples
    const paths: { label: string; side: 'ours' | 'anchor'; args?: string[]; skip?: string }[] = [
      { label: 'pgwasm', side: 'ours', ...(ours ? { args: ['ours', 'bulk', c.kind, String(c.rows), 'memory'] } : { skip: 'pgwasm did not load' }) },
      { label: BULK_DIR, side: 'ours', ...(ours ? { args: ['ours', 'bulk', c.kind, String(c.rows)] } : { skip: 'pgwasm did not load' }) },
      {
        label: 'PGlite',
        side: 'anchor',
        ...(!pglite
          ? { skip: 'PGlite did not load' }
          : c.rows > PGLITE_BULK_LIMIT
            ? { skip: `not run past ${PGLITE_BULK_LIMIT.toLocaleString('en-US')} rows: PGlite's in-memory file grows by a copy of the whole file, so its time grows with the square of the rows (see the smaller row)` }
            : { args: ['pglite', 'bulk', c.kind, String(c.rows), 'memory'] }),
      },
      { label: BULK_NATIVE, side: 'anchor', ...(s.config.nativeUrl ? { args: ['native', 'bulk', c.kind, String(c.rows), s.config.nativeUrl] } : { skip: s.config.nativeReason }) },
      ...(c.kind === 'copy'
        ? [
            { label: BULK_SERVER, side: 'ours' as const, ...(ours ? { args: ['ours', 'bulk', c.kind, String(c.rows), 'server'] } : { skip: 'pgwasm did not load' }) },
            {
              label: BULK_NATIVE_STDIN,
              side: 'anchor' as const,
              ...(s.config.nativeUrl ? { args: ['native', 'bulk', c.kind, String(c.rows), s.config.nativeUrl, 'stdin'] } : { skip: s.config.nativeReason }),
            },
          ]
        : []),
    ]
    // Rounds of one sample per path, not a path's samples back to back: this
    // VM's cost of fresh memory drifts over minutes (the same load read 5.3 s
    // and 7.6 s a quarter of an hour apart), and a drift must not land on one
    // side of a ratio only. Every other round runs the paths in reverse, so
    // that none always follows the same one (native's disk writes, say).
    const runs = paths.map((path) => ({ path, values: [] as number[], failure: undefined as string | undefined }))
    for (let i = 0; i < n; i++) {
      for (const run of i % 2 === 0 ? runs : [...runs].reverse()) {
        const { path } = run
        if (!path.args || run.failure !== undefined) continue
        const args = path.label === BULK_DIR ? [...path.args, mkdtempSync(join(work, 'bulk-'))] : path.args
        const out = await spawn(args, BULK_TIMEOUT)
        try {
          if (!out.ok) throw new Error('exit')
          run.values.push(...(JSON.parse(out.stdout.trim().split('\n').pop() ?? '') as { samples: number[] }).samples)
        } catch {
          run.failure = `child exited ${out.code}: ${out.stderr.trim().split('\n').slice(-3).join(' / ').slice(0, 300)}`
        }
        if (path.label === BULK_DIR) rmSync(args[args.length - 1]!, { recursive: true, force: true })
      }
    }
    for (const { path, values, failure } of runs) {
      const base = { case: c.name, path: path.label, side: path.side, unit: 'ms' as Unit, ...(path.side === 'anchor' ? { vs: 'pgwasm' } : {}) }
      if (!path.args) s.mark({ ...base, status: 'skipped', reason: path.skip! })
      else if (failure !== undefined) s.mark({ ...base, status: 'failed', reason: failure })
      else s.add({ ...base, samples: values })
    }
  }
  const [, large] = bulkRows(s.config.scale)
  for (const kind of BULK_KINDS) {
    const name = bulkCase(kind, large!)
    s.ratio(`${name}: in memory / on a directory, pgwasm (target <= 1.5)`, { case: name, path: 'pgwasm' }, { case: name, path: BULK_DIR })
    s.ratio(`${name}: pgwasm in memory / native pg (target <= 2)`, { case: name, path: 'pgwasm' }, { case: name, path: BULK_NATIVE })
  }
  const copyLarge = bulkCase('copy', large!)
  s.ratio(`${copyLarge}: through pgwasm-server / native pg (target <= 2)`, { case: copyLarge, path: BULK_SERVER }, { case: copyLarge, path: BULK_NATIVE })
  s.ratio(`${copyLarge}: through pgwasm-server / native pg, both COPY FROM STDIN from the same client over TCP`, { case: copyLarge, path: BULK_SERVER }, { case: copyLarge, path: BULK_NATIVE_STDIN })
  const [small] = bulkRows(s.config.scale)
  for (const kind of BULK_KINDS) {
    const name = bulkCase(kind, small!)
    s.ratio(`${name}: pgwasm / PGlite, in memory`, { case: name, path: 'pgwasm' }, { case: name, path: 'PGlite' })
  }
}

/** A bulk child loads up to 1 GB: minutes, not the start-up children's seconds. */
const BULK_TIMEOUT = 600_000

/** The same test files with no database: what vitest's own start of a file costs. */
const VITEST_ALONE = 'vitest alone (the same tests without a database)'
/** The same test files run with vitest's `isolate: false`: one process runs them one after another. */
const NOT_ISOLATED = 'pgwasm, vitest isolate: false'

/**
 * The test-suite shape Prisma users have: `vitest run` of the same 50 tests
 * as 5 files of 10 (each file a new process with its own TestDatabase) and
 * as one file of 50. Each test file: TestDatabase.create in beforeAll, reset
 * in beforeEach, an insert and a count per test. Times the whole run.
 * Beside it, in the same rotation: the same files without the database
 * (vitest's own cost of a file, the floor of the ratio) and with vitest's
 * `isolate: false` (files share a process, and so the compiled engine).
 */
async function testFiles(s: SuiteRun, live: Impl[], samples: number): Promise<void> {
  const wanted = [TESTDB_FILES, TESTDB_ONE_FILE].filter((c) => s.wants(c))
  if (wanted.length === 0) return
  const skipPglite = (name: string) =>
    s.mark({ case: name, path: 'PGlite', side: 'anchor', unit: 'ms', vs: 'pgwasm', status: 'skipped', reason: 'PGlite has no TestDatabase' })
  if (!live.some((i) => i.key === 'ours')) {
    for (const name of wanted) {
      s.mark({ case: name, path: 'pgwasm', side: 'ours', unit: 'ms', status: 'skipped', reason: 'pgwasm did not load' })
      skipPglite(name)
    }
    return
  }
  s.notes.push(
    `"${TESTDB_FILES}" and "${TESTDB_ONE_FILE}": the same 50 tests (an insert and a count on the 12-model schema, TestDatabase.create in beforeAll and reset() in beforeEach), run by \`vitest run\` with its defaults as 5 files or as one; the sample is the whole run's wall time. A first run (not measured) saves the schema's state. "${VITEST_ALONE}" runs the same files with each test's body and the database taken out: vitest's own cost of starting a file (a new process), which bounds the 5 files / 1 file ratio from below whatever a file's database costs. "${NOT_ISOLATED}" runs the pgwasm files with \`isolate: false\` in the vitest config (pglite-prisma's README: files share a process one after another, so only the first compiles the engine and reads the saved state).`,
  )
  // Inside the benchmark package, so the test files resolve @pgwasm/pglite-prisma.
  mkdirSync(CACHE_DIR, { recursive: true })
  const root = mkdtempSync(join(CACHE_DIR, 'prisma-files-'))
  try {
    const schema = join(root, 'schema.prisma')
    writeFileSync(schema, PRISMA_SCHEMA)
    const layouts = [['five', 5, 10], ['one', 1, 50]] as const
    for (const [dir, files, tests] of layouts) {
      mkdirSync(join(root, dir))
      mkdirSync(join(root, `${dir}-alone`))
      for (let f = 0; f < files; f++) {
        writeFileSync(join(root, dir, `f${f}.test.mjs`), testFile(schema, tests))
        writeFileSync(join(root, `${dir}-alone`, `f${f}.test.mjs`), emptyTestFile(tests))
      }
    }
    writeFileSync(join(root, 'vitest.config.mjs'), 'export default { test: { include: ["**/*.test.mjs"] } }\n')
    writeFileSync(join(root, 'vitest.shared.config.mjs'), 'export default { test: { include: ["**/*.test.mjs"], isolate: false } }\n')
    const vitest = join(dirname(createRequire(join(BENCH_DIR, 'package.json')).resolve('vitest/package.json')), 'vitest.mjs')
    const runVitest = async (dir: string, config = 'vitest.config.mjs'): Promise<number> => {
      const t = performance.now()
      const out = await runNodeIn(root, vitest, ['run', '--root', root, '--config', join(root, config), '--dir', dir], VITEST_TIMEOUT)
      if (!out.ok) throw new Error(`vitest run of ${dir} exited ${out.code}: ${(out.stdout + out.stderr).trim().split('\n').slice(-5).join(' / ').slice(0, 400)}`)
      return performance.now() - t
    }
    const runs: { case: string; path: string; side: 'ours' | 'anchor'; run: () => Promise<number> }[] = [
      { case: TESTDB_FILES, path: 'pgwasm', side: 'ours', run: () => runVitest('five') },
      { case: TESTDB_ONE_FILE, path: 'pgwasm', side: 'ours', run: () => runVitest('one') },
      { case: TESTDB_FILES, path: VITEST_ALONE, side: 'anchor', run: () => runVitest('five-alone') },
      { case: TESTDB_ONE_FILE, path: VITEST_ALONE, side: 'anchor', run: () => runVitest('one-alone') },
      { case: TESTDB_FILES, path: NOT_ISOLATED, side: 'ours', run: () => runVitest('five', 'vitest.shared.config.mjs') },
      { case: TESTDB_ONE_FILE, path: NOT_ISOLATED, side: 'ours', run: () => runVitest('one', 'vitest.shared.config.mjs') },
    ]
    const results = runs.map(() => [] as number[])
    let failure: string | undefined
    try {
      await runVitest('one')
      for (let i = 0; i < samples; i++) for (const [k, r] of runs.entries()) results[k]!.push(await r.run())
    } catch (err) {
      failure = err instanceof Error ? err.message : String(err)
    }
    for (const [k, r] of runs.entries()) {
      if (!wanted.includes(r.case)) continue
      const base = { case: r.case, path: r.path, side: r.side, unit: 'ms' as const, ...(r.side === 'anchor' ? { vs: 'pgwasm' } : {}) }
      if (failure !== undefined) s.mark({ ...base, status: 'failed', reason: failure })
      else s.add({ ...base, samples: results[k]! })
    }
    for (const name of wanted) skipPglite(name)
    s.ratio('Prisma tests as 5 files / as 1 file, pgwasm (target <= 1.5)', { case: TESTDB_FILES, path: 'pgwasm' }, { case: TESTDB_ONE_FILE, path: 'pgwasm' })
    s.ratio('the same files without a database, vitest alone: 5 files / 1 file (the floor of the row above)', { case: TESTDB_FILES, path: VITEST_ALONE }, { case: TESTDB_ONE_FILE, path: VITEST_ALONE })
    s.ratio('Prisma tests as 5 files / as 1 file, pgwasm, vitest isolate: false', { case: TESTDB_FILES, path: NOT_ISOLATED }, { case: TESTDB_ONE_FILE, path: NOT_ISOLATED })
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

/** A vitest file of `tests` empty tests: the shape of {@link testFile} without the database. */
function emptyTestFile(tests: number): string {
  const body = Array.from({ length: tests }, (_, i) => `it('t${i}', () => {\n  expect(${i}).toBe(${i})\n})`).join('\n')
  return `import { expect, it } from 'vitest'\n${body}\n`
}

/** A vitest file of `tests` tests on its own TestDatabase of `schema`. */
function testFile(schema: string, tests: number): string {
  const body = Array.from(
    { length: tests },
    (_, i) => `it('t${i}', async () => {
  await testDb.db.query('insert into "M0" (name, qty) values ($1, 1)', ['t${i}'])
  const { rows } = await testDb.db.query('select count(*)::int as n from "M0"')
  expect(rows[0].n).toBe(1)
})`,
  ).join('\n')
  return `import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { TestDatabase } from '@pgwasm/pglite-prisma'

let testDb
beforeAll(async () => {
  testDb = await TestDatabase.create({ schema: readFileSync(${JSON.stringify(schema)}, 'utf8') })
})
beforeEach(() => testDb.reset())
afterAll(() => testDb.close())
${body}
`
}

/** A whole vitest run: its processes start, import and finish. */
const VITEST_TIMEOUT = 300_000
