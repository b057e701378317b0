import { connectNative, redact } from '../anchors.js'
import { errorText, timeInterleaved, type SuiteRun, type TimedPath } from '../harness.js'
import { findNode24 } from '../node24.js'
import { ensurePrismaClient, ITEM_DDL, ITEM_SCHEMA, ITEM_SEED, loadPrismaClient, type BenchPrisma, type BenchPrismaCtor } from '../prisma-client.js'
import { CREATE, FIND_MANY, FIND_UNIQUE, PRISMA_CASES, prismaTask, TRANSACTION, UPDATE, type PrismaCase } from '../prisma-workload.js'
import { BridgeChild } from './prisma-bridge.js'

/**
 * Prisma Client 7 calls on one 200-row table through four driver paths:
 * ours, two PGlite anchors and `@prisma/adapter-pg` on native PostgreSQL.
 * The bridge runs in a child process (it requires Node >= 22); the other
 * paths run here. All take turns per round (timeInterleaved).
 */

export { PRISMA_CASES }
export const OURS = 'pgwasm Prisma adapter'
/** Ours on an instance made without the README's `prismaOptions`: what a user who skips them gets. */
export const OURS_PLAIN = 'pgwasm Prisma adapter, plain create()'
export const ADAPTER = 'pglite-prisma-adapter'
export const BRIDGE = 'prisma-pglite-bridge'
export const NATIVE = 'native pg (adapter-pg)'
/** Ours in the bridge's child process, on the bridge's Node: the like-for-like comparison when that Node is not this one. */
export const OURS_BRIDGE_NODE = 'pgwasm Prisma adapter (on the bridge\'s Node)'
export const PRISMA_PATHS = [OURS, OURS_PLAIN, ADAPTER, BRIDGE, OURS_BRIDGE_NODE, NATIVE]

const NATIVE_SCHEMA = 'pgwasm_bench_prisma'
const WRITES: readonly PrismaCase[] = [CREATE, UPDATE, TRANSACTION]

/** A path that is set up, or why it is not. */
type Setup =
  | { path: string; status: 'ok'; timed: (name: PrismaCase) => TimedPath; close(): Promise<void> }
  | { path: string; status: 'skipped' | 'failed'; reason: string }

/** An in-process path: one client for every case; a case's function lives through all its rounds, so its counters (ids, values) carry over. */
function localPath(path: string, prisma: BenchPrisma, close: () => Promise<void>): Setup {
  return {
    path,
    status: 'ok',
    timed: (name) => ({ path, fn: prismaTask(name, prisma) }),
    close: async () => {
      await prisma.$disconnect()
      await close()
    },
  }
}

/** Ours as the package README sets it up (`PGlite.create(prismaOptions)`), or on a plain instance. */
async function setupOurs(PrismaClient: BenchPrismaCtor, path: typeof OURS | typeof OURS_PLAIN): Promise<Setup> {
  try {
    const { PGlite } = await import('@pgwasm/pglite')
    const { PrismaPGlite, prismaOptions, pushSchema } = await import('@pgwasm/pglite-prisma')
    const db = await PGlite.create(path === OURS ? prismaOptions : {})
    await pushSchema(db, { schema: ITEM_SCHEMA })
    await db.exec(ITEM_SEED)
    const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })
    await prisma.$connect()
    return localPath(path, prisma, () => db.close())
  } catch (err) {
    return { path, status: 'failed', reason: `setup: ${errorText(err)}` }
  }
}

async function setupAdapter(PrismaClient: BenchPrismaCtor): Promise<Setup> {
  try {
    const { PGlite } = await import('@electric-sql/pglite')
    const { PrismaPGlite } = await import('pglite-prisma-adapter')
    const db = await PGlite.create()
    await db.exec(`${ITEM_DDL};\n${ITEM_SEED}`)
    const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })
    await prisma.$connect()
    return localPath(ADAPTER, prisma, () => db.close())
  } catch (err) {
    return { path: ADAPTER, status: 'skipped', reason: `pglite-prisma-adapter did not set up: ${errorText(err)}` }
  }
}

async function setupNative(PrismaClient: BenchPrismaCtor, s: SuiteRun): Promise<Setup> {
  const client = await connectNative(s.config.nativeUrl, s.config.nativeReason)
  if (!client.ok) return { path: NATIVE, status: 'skipped', reason: client.reason }
  const url = s.config.nativeUrl!
  try {
    await client.value.query(`drop schema if exists ${NATIVE_SCHEMA} cascade; create schema ${NATIVE_SCHEMA}; set search_path to ${NATIVE_SCHEMA}`)
    await client.value.query(`${ITEM_DDL};\n${ITEM_SEED}`)
    const { PrismaPg } = await import('@prisma/adapter-pg')
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }, { schema: NATIVE_SCHEMA }) })
    await prisma.$connect()
    return localPath(NATIVE, prisma, async () => {
      await client.value.query(`drop schema if exists ${NATIVE_SCHEMA} cascade`).catch(() => {})
      await client.value.end()
    })
  } catch (err) {
    await client.value.end().catch(() => {})
    return { path: NATIVE, status: 'failed', reason: `setup on ${redact(url)}: ${errorText(err)}` }
  }
}

/**
 * The bridge on Node 24 when there is one, else on this Node with the one
 * polyfill it needs; says which in the notes, or why neither ran.
 */
async function setupBridge(s: SuiteRun, bridgeNode: { bin?: string }): Promise<Setup> {
  const tried: string[] = []
  const node24 = await findNode24()
  const runtimes: { node: string; label: string }[] = []
  if (node24.ok) runtimes.push({ node: node24.value.bin, label: `Node ${node24.value.version}` })
  else tried.push(`Node 24: ${node24.reason}`)
  runtimes.push({ node: process.execPath, label: `Node ${process.version}` })
  for (const rt of runtimes) {
    try {
      const { child, node, polyfilled } = await BridgeChild.start(rt.node)
      if (rt.node !== process.execPath) bridgeNode.bin = rt.node
      const how = polyfilled.length > 0 ? `, polyfilled: ${polyfilled.join(', ')}` : ', no polyfill'
      s.settings.bridgeRuntime = `${node}${how}`
      s.notes.push(
        `prisma-pglite-bridge ran in a child process on Node ${node.replace(/^v/, '')}${how}${tried.length > 0 ? ` (${tried.join('; ')})` : ''}; the other paths ran in the suite process on Node ${process.version.replace(/^v/, '')}.`,
      )
      return {
        path: BRIDGE,
        status: 'ok',
        timed: (name) => ({ path: BRIDGE, round: (iterations, warmup) => child.round(name, iterations, warmup) }),
        close: () => child.close(),
      }
    } catch (err) {
      tried.push(`${rt.label}: ${errorText(err)}`)
    }
  }
  return { path: BRIDGE, status: 'skipped', reason: `the bridge did not set up: ${tried.join('; ')}` }
}

/** Our adapter in a child on the bridge's Node, when that is another Node than the suite's. */
async function setupOursOnBridgeNode(bridgeNode: { bin?: string }): Promise<Setup> {
  if (!bridgeNode.bin) {
    return { path: OURS_BRIDGE_NODE, status: 'skipped', reason: `the bridge ran on this process's Node (${process.version}): compare with the pgwasm Prisma adapter row` }
  }
  try {
    const { child } = await BridgeChild.start(bridgeNode.bin, 'ours')
    return {
      path: OURS_BRIDGE_NODE,
      status: 'ok',
      timed: (name) => ({ path: OURS_BRIDGE_NODE, round: (iterations, warmup) => child.round(name, iterations, warmup) }),
      close: () => child.close(),
    }
  } catch (err) {
    return { path: OURS_BRIDGE_NODE, status: 'failed', reason: errorText(err) }
  }
}

export async function run(s: SuiteRun): Promise<void> {
  const cfg = s.config
  const reads = cfg.iterations ?? Math.max(10, Math.round(1000 * cfg.scale))
  const writes = cfg.iterations ?? Math.max(10, Math.round(300 * cfg.scale))
  const warmup = cfg.warmup ?? Math.max(2, Math.round(100 * cfg.scale))
  const rounds = 5
  Object.assign(s.settings, { readIterations: reads, writeIterations: writes, warmup, rounds, rows: 200 })
  s.notes.push(
    'One table of 200 rows (id, text, int, boolean, timestamp(3)); every path runs the same Prisma Client calls, per case in 5 rounds in rotating order.',
    'pgwasm: schema applied with pushSchema from @pgwasm/pglite-prisma; the anchors get the same table from plain SQL.',
    "pgwasm rows use the instance the package README sets up, PGlite.create(prismaOptions) (Prisma's text forms as the instance's parsers, plan_cache_mode = force_generic_plan); the 'plain create()' row uses PGlite.create() with no options.",
  )
  const wanted = PRISMA_CASES.filter((c) => s.wants(c))
  if (wanted.length === 0) return

  let setups: Setup[]
  try {
    s.progress(`Prisma Client: ${await ensurePrismaClient()}`)
    const PrismaClient = await loadPrismaClient()
    setups = []
    const bridgeNode: { bin?: string } = {}
    for (const setup of [
      () => setupOurs(PrismaClient, OURS),
      () => setupOurs(PrismaClient, OURS_PLAIN),
      () => setupAdapter(PrismaClient),
      () => setupBridge(s, bridgeNode),
      () => setupOursOnBridgeNode(bridgeNode),
      () => setupNative(PrismaClient, s),
    ]) {
      const t0 = performance.now()
      const p = await setup()
      s.progress(`${p.path}: ${p.status === 'ok' ? 'set up' : p.status} in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
      setups.push(p)
    }
  } catch (err) {
    const reason = `Prisma Client: ${errorText(err)}`
    setups = PRISMA_PATHS.map((path) => ({ path, status: 'failed', reason }))
  }

  const failed = new Map<string, string>()
  try {
    for (const name of wanted) {
      const live = setups.filter((p): p is Extract<Setup, { status: 'ok' }> => p.status === 'ok' && !failed.has(p.path))
      const iterations = WRITES.includes(name) ? writes : reads
      const results = await timeInterleaved(
        live.map((p) => p.timed(name)),
        { iterations, warmup, rounds },
      )
      for (const p of setups) {
        const ours = p.path === OURS || p.path === OURS_PLAIN || p.path === OURS_BRIDGE_NODE
        const base = { case: name, path: p.path, side: ours ? ('ours' as const) : ('anchor' as const), unit: 'ms' as const, ...(ours ? {} : { vs: OURS }) }
        const res = results.get(p.path)
        if (p.status !== 'ok') s.mark({ ...base, status: p.status, reason: p.reason })
        else if (failed.has(p.path)) s.mark({ ...base, status: 'failed', reason: failed.get(p.path)! })
        else if (res instanceof Error) {
          failed.set(p.path, `an earlier case failed: ${errorText(res)}`)
          s.mark({ ...base, status: 'failed', reason: errorText(res) })
        } else s.add({ ...base, samples: res ?? [] })
      }
    }
  } finally {
    for (const p of setups) if (p.status === 'ok') await p.close().catch(() => {})
  }

  for (const c of [FIND_MANY, FIND_UNIQUE]) {
    s.ratio(`${c}: pgwasm / prisma-pglite-bridge, both on the bridge's Node (target <= 0.75)`, { case: c, path: OURS_BRIDGE_NODE }, { case: c, path: BRIDGE })
    s.ratio(`${c}: pgwasm on this Node / prisma-pglite-bridge on its Node`, { case: c, path: OURS }, { case: c, path: BRIDGE })
    s.ratio(`${c}: pgwasm / pglite-prisma-adapter`, { case: c, path: OURS }, { case: c, path: ADAPTER })
  }
}
