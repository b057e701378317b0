/**
 * One start-up measurement in a fresh process. Bundled to plain JS and run
 * with bare `node`, it prints one JSON line: { samples (ms), rssMB }.
 *   startup-child <ours|pglite> first
 *   startup-child <ours|pglite> later <count>
 *   startup-child <ours|pglite> clone <count>
 *   startup-child <ours|pglite> prepare <dir>
 *   startup-child <ours|pglite> open <dir>
 *   startup-child <ours|pglite> many <count>   (samples: [RSS in MB with <count> databases open])
 */
interface Db {
  query(sql: string): Promise<{ rows: unknown[] }>
  exec(sql: string): Promise<unknown>
  clone(): Promise<Db>
  close(): Promise<void>
}
interface Ctor {
  create(dataDir?: string): Promise<Db>
}

const [impl, mode, arg] = process.argv.slice(2)

async function load(): Promise<Ctor> {
  const mod = (impl === 'ours' ? await import('@pgwasm/pglite') : await import('@electric-sql/pglite')) as unknown as { PGlite: Ctor }
  return mod.PGlite
}

function rssMB(): number {
  // maxRSS is in kilobytes: the process's peak resident set so far.
  return process.resourceUsage().maxRSS / 1024
}

async function check(db: Db, sql: string, expected: number): Promise<void> {
  const { rows } = await db.query(sql)
  const value = Number(Object.values(rows[0] as Record<string, unknown>)[0])
  if (value !== expected) throw new Error(`${sql} returned ${value}, expected ${expected}`)
}

const samples: number[] = []
const t0 = performance.now()
const PGlite = await load()
if (mode === 'first') {
  const db = await PGlite.create()
  samples.push(performance.now() - t0)
  await check(db, 'select 1 as one', 1)
  const rss = rssMB()
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rss }))
} else if (mode === 'later') {
  // The first instance pays for compiling the module; later ones show the per-instance cost.
  await (await PGlite.create()).close()
  for (let i = 0; i < Number(arg); i++) {
    const t = performance.now()
    const db = await PGlite.create()
    samples.push(performance.now() - t)
    await check(db, 'select 1 as one', 1)
    await db.close()
  }
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'clone') {
  const db = await PGlite.create()
  await db.exec(`create table t (id int primary key, a text); insert into t select g, 'row ' || g from generate_series(1, 1000) g`)
  for (let i = 0; i < Number(arg); i++) {
    const t = performance.now()
    const copy = await db.clone()
    samples.push(performance.now() - t)
    await check(copy, 'select count(*) from t', 1000)
    await copy.close()
  }
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'prepare') {
  const db = await PGlite.create(arg)
  await db.exec(`create table t (id int primary key, a text); insert into t select g, 'row ' || g from generate_series(1, 1000) g`)
  await db.close()
  console.log(JSON.stringify({ samples: [], rssMB: rssMB() }))
} else if (mode === 'open') {
  const t = performance.now()
  const db = await PGlite.create(arg)
  samples.push(performance.now() - t)
  await check(db, 'select count(*) from t', 1000)
  await db.close()
  console.log(JSON.stringify({ samples, rssMB: rssMB() }))
} else if (mode === 'many') {
  // Every database stays open and holds a little data, as a test suite's per-file databases do.
  const dbs: Db[] = []
  for (let i = 0; i < Number(arg); i++) {
    const db = await PGlite.create()
    await db.exec(`create table t (id int primary key, a text); insert into t select g, 'row ' || g from generate_series(1, 1000) g`)
    dbs.push(db)
  }
  for (const db of dbs) await check(db, 'select count(*) from t', 1000)
  const rss = process.memoryUsage().rss / (1024 * 1024)
  for (const db of dbs) await db.close()
  console.log(JSON.stringify({ samples: [rss], rssMB: rssMB() }))
} else {
  throw new Error(`unknown mode ${mode}`)
}
// Engines can keep timers alive; the line is printed, so leave now.
process.exit(0)
