/**
 * The three packages as a user gets them: packed with pnpm (which rewrites
 * `workspace:` ranges), installed with npm from the tarballs alone (their
 * third-party dependencies come from the registry), then every entry of each
 * `exports` map imported and every bin run, from outside the workspace.
 * Needs the packages built (`pnpm test` builds them first).
 */
import { spawnSync, type SpawnSyncOptions } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gunzipSync, gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { unpackTar } from '../src/engine/files/tar.js'

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const PNPM = 'pnpm@10.34.8'
const PACKAGES = ['pglite', 'pglite-socket', 'pglite-prisma'] as const
/** Bins the brief of each package promises; the test also runs any other bin a package declares. */
const EXPECTED_BINS: Record<(typeof PACKAGES)[number], readonly string[]> = {
  pglite: ['pgwasm-dump'],
  'pglite-socket': ['pgwasm-server'],
  'pglite-prisma': [],
}

type ExportTarget = string | { readonly [condition: string]: ExportTarget }

interface PackageJson {
  readonly name: string
  readonly version: string
  readonly bin?: Record<string, string>
  readonly exports: Record<string, ExportTarget>
  readonly dependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
  readonly optionalDependencies?: Record<string, string>
}

interface Packed {
  readonly tarball: string
  /** Files of the tarball (paths without the leading `package/`) and their bytes. */
  readonly files: ReadonlyMap<string, Uint8Array>
  readonly manifest: PackageJson
}

interface ImportResult {
  readonly specifier: string
  readonly via: 'import' | 'require'
  readonly keys?: readonly string[]
  readonly error?: string
}

let work: string
let app: string
const packed = new Map<string, Packed>()

function run(command: string, args: readonly string[], options: SpawnSyncOptions): string {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options })
  if (result.status !== 0) {
    throw new Error(
      `\`${command} ${args.join(' ')}\` in ${String(options.cwd)} failed (${result.error?.message ?? `exit ${result.status}`}):\n${String(result.stderr)}${String(result.stdout)}`,
    )
  }
  return String(result.stdout)
}

/** Conditions a target object offers, flattened: `{ import: { types, default } }` -> import, import.types... */
function conditions(target: ExportTarget, prefix = ''): Map<string, string> {
  const out = new Map<string, string>()
  if (typeof target === 'string') out.set(prefix || 'default', target)
  else for (const [key, value] of Object.entries(target)) for (const [k, v] of conditions(value, prefix ? `${prefix}.${key}` : key)) out.set(k, v)
  return out
}

/** The subpaths a `./x/*` pattern covers, read from the files its import target matches in the tarball. */
function expandPattern(subpath: string, target: ExportTarget, files: ReadonlyMap<string, Uint8Array>): string[] {
  const main = conditions(target).get('import.default') ?? conditions(target).get('default')
  if (!main) throw new Error(`export "${subpath}" has no import target to expand`)
  const [before, after] = main.replace(/^\.\//, '').split('*') as [string, string]
  const stems: string[] = []
  for (const file of files.keys()) {
    if (!file.startsWith(before) || !file.endsWith(after)) continue
    const stem = file.slice(before.length, file.length - after.length)
    if (stem !== '' && !stem.includes('/')) stems.push(stem)
  }
  return stems.sort().map((stem) => subpath.replace('*', stem))
}

/** Every concrete subpath of an exports map, each with its own conditions (`*` filled in). */
function subpaths(pkg: Packed): { subpath: string; targets: Map<string, string> }[] {
  const out: { subpath: string; targets: Map<string, string> }[] = []
  for (const [subpath, target] of Object.entries(pkg.manifest.exports)) {
    if (!subpath.includes('*')) {
      out.push({ subpath, targets: conditions(target) })
      continue
    }
    const stems = expandPattern(subpath, target, pkg.files)
    expect(stems.length, `files matching "${subpath}" in ${pkg.manifest.name}`).toBeGreaterThan(0)
    const [head, tail] = subpath.split('*') as [string, string]
    for (const concrete of stems) {
      const stem = concrete.slice(head.length, concrete.length - tail.length)
      out.push({ subpath: concrete, targets: new Map([...conditions(target)].map(([k, v]) => [k, v.replace('*', stem)])) })
    }
  }
  return out
}

function specifier(name: string, subpath: string): string {
  return subpath === '.' ? name : `${name}/${subpath.slice(2)}`
}

// Runs in a child process inside the installed app, so every specifier
// resolves through the app's node_modules, not the workspace.
const IMPORT_SCRIPT = `
import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const out = []
for (const { specifier, via } of JSON.parse(process.argv[2])) {
  try {
    const json = specifier.endsWith('.json')
    const mod = via === 'require' ? require(specifier) : await import(specifier, json ? { with: { type: 'json' } } : undefined)
    out.push({ specifier, via, keys: Object.keys(json && via === 'import' ? mod.default : mod) })
  } catch (e) {
    out.push({ specifier, via, error: String(e && e.stack || e) })
  }
}
process.stdout.write(JSON.stringify(out))
`

// One query from the installed core, through both module systems: the
// engine package must resolve from where npm put it.
const QUERY_SCRIPT = `
const { createRequire } = await import('node:module')
const esm = await import('@pgwasm/pglite')
const cjs = createRequire(import.meta.url)('@pgwasm/pglite')
const rows = []
for (const { PGlite } of [esm, cjs]) {
  const db = await PGlite.create()
  rows.push((await db.query("select 'packed' as source")).rows)
  await db.close()
}
process.stdout.write(JSON.stringify(rows))
`

// drizzle-orm's PGlite driver, given our core under PGlite's package name:
// a migrations folder as drizzle-kit writes it, then a transaction and CRUD.
const DRIZZLE_SCRIPT = `
import { mkdirSync, writeFileSync } from 'node:fs'
import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { migrate } from 'drizzle-orm/pglite/migrator'
import { eq, sql } from 'drizzle-orm'
import { pgTable, serial, text } from 'drizzle-orm/pg-core'
mkdirSync('drizzle/meta', { recursive: true })
writeFileSync('drizzle/meta/_journal.json', JSON.stringify({ version: '7', dialect: 'postgresql', entries: [{ idx: 0, version: '7', when: 1735689600000, tag: '0000_init', breakpoints: true }] }))
writeFileSync('drizzle/0000_init.sql', 'CREATE TABLE "notes" ("id" serial PRIMARY KEY NOT NULL, "body" text NOT NULL);')
const notes = pgTable('notes', { id: serial('id').primaryKey(), body: text('body').notNull() })
const client = new PGlite()
const db = drizzle(client)
await migrate(db, { migrationsFolder: 'drizzle' })
await db.transaction(async (tx) => {
  await tx.insert(notes).values([{ body: 'first' }, { body: 'second' }, { body: 'third' }])
})
await db.update(notes).set({ body: 'changed' }).where(eq(notes.body, 'second'))
await db.delete(notes).where(eq(notes.body, 'third'))
const rows = await db.select({ body: notes.body }).from(notes).orderBy(notes.id)
const applied = await db.execute(sql\`select count(*)::int as n from drizzle.__drizzle_migrations\`)
process.stdout.write(JSON.stringify({ rows, migrations: applied.rows[0].n, engine: typeof client.lockSessionUser }))
await client.close()
`

// A test suite's schema reset on one long-lived instance, as drizzle users
// write it: an enum dropped and made again with another label, then the same
// drizzle query (the same SQL text, a cached statement) as before the reset.
const DRIZZLE_ENUM_RESET_SCRIPT = `
import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { eq, sql } from 'drizzle-orm'
import { pgEnum, pgTable, serial } from 'drizzle-orm/pg-core'
const client = new PGlite()
const db = drizzle(client)
const reset = async (labels) => {
  await db.execute(sql.raw('drop table if exists feelings'))
  await db.execute(sql.raw('drop type if exists mood'))
  await db.execute(sql.raw(\`create type mood as enum (\${labels.map((l) => \`'\${l}'\`).join(', ')})\`))
  await db.execute(sql.raw('create table feelings (id serial primary key, m mood not null)'))
}
const before = pgEnum('mood', ['ok', 'sad'])
const feelingsBefore = pgTable('feelings', { id: serial('id').primaryKey(), m: before('m').notNull() })
await reset(['ok', 'sad'])
await db.insert(feelingsBefore).values({ m: 'sad' })
const first = await db.select({ m: feelingsBefore.m }).from(feelingsBefore).where(eq(feelingsBefore.m, 'sad'))
const after = pgEnum('mood', ['ok', 'sad', 'glad'])
const feelings = pgTable('feelings', { id: serial('id').primaryKey(), m: after('m').notNull() })
await reset(['ok', 'sad', 'glad'])
await db.insert(feelings).values([{ m: 'glad' }, { m: 'sad' }])
const second = await db.select({ m: feelings.m }).from(feelings).where(eq(feelings.m, 'sad'))
const third = await db.select({ m: feelings.m }).from(feelings).where(eq(feelings.m, 'glad'))
process.stdout.write(JSON.stringify({ first, second, third }))
await client.close()
`

// The same use, type-checked: drizzle's types name PGlite's class, which the
// alias makes ours, so the instance needs no cast.
const DRIZZLE_TS = `
import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { pgTable, serial, text } from 'drizzle-orm/pg-core'
const notes = pgTable('notes', { id: serial('id').primaryKey(), body: text('body').notNull() })
const client: PGlite = new PGlite()
const db = drizzle(client)
export async function bodies(): Promise<string[]> {
  await db.insert(notes).values({ body: 'typed' })
  const rows: { id: number; body: string }[] = await db.select().from(notes)
  return rows.map((r) => r.body)
}
`

const KYSELY_SCRIPT = `
import { PGlite } from '@electric-sql/pglite'
import { Kysely } from 'kysely'
import { Migrator } from 'kysely/migration'
import { PGliteDialect } from 'kysely-pglite-dialect'
const client = new PGlite()
const db = new Kysely({ dialect: new PGliteDialect(client) })
const migrations = {
  '001_notes': {
    up: (k) => k.schema.createTable('notes').addColumn('id', 'serial', (c) => c.primaryKey()).addColumn('body', 'text', (c) => c.notNull()).execute(),
  },
}
const { error, results } = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateToLatest()
if (error) throw error
await db.transaction().execute((trx) => trx.insertInto('notes').values([{ body: 'first' }, { body: 'second' }]).execute())
await db.updateTable('notes').set({ body: 'changed' }).where('body', '=', 'second').execute()
await db.deleteFrom('notes').where('body', '=', 'first').execute()
const rows = await db.selectFrom('notes').select(['body']).execute()
process.stdout.write(JSON.stringify({ migrated: results.map((r) => r.migrationName + ':' + r.status), rows, engine: typeof client.lockSessionUser }))
await db.destroy()
`

const KYSELY_TS = `
import { PGlite } from '@electric-sql/pglite'
import { Kysely, type Generated } from 'kysely'
import { PGliteDialect } from 'kysely-pglite-dialect'
interface Database { notes: { id: Generated<number>; body: string } }
const client: PGlite = new PGlite()
const db = new Kysely<Database>({ dialect: new PGliteDialect(client) })
export async function bodies(): Promise<string[]> {
  await db.insertInto('notes').values({ body: 'typed' }).execute()
  const rows = await db.selectFrom('notes').select(['body']).execute()
  return rows.map((r) => r.body)
}
`

describe('packed packages installed with npm from their tarballs', () => {
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'pgwasm-packaging-'))
    const packs = join(work, 'packs')
    mkdirSync(packs)
    for (const name of PACKAGES) {
      const dir = join(repo, 'packages', name)
      // The build writes the entry declarations last: without them dist/ is half built.
      if (!existsSync(join(dir, 'dist', 'index.d.ts'))) {
        throw new Error(`packages/${name}/dist is not built: run \`node scripts/build-package.mjs packages/${name}\` (or \`pnpm build\`) first`)
      }
      const before = new Set(readdirSync(packs))
      run('npx', ['-y', PNPM, 'pack', '--pack-destination', packs], { cwd: dir })
      const made = readdirSync(packs).filter((f) => !before.has(f))
      expect(made, `tarballs pnpm pack wrote for packages/${name}`).toHaveLength(1)
      const tarball = join(packs, made[0]!)
      const files = new Map<string, Uint8Array>()
      for (const entry of unpackTar(gunzipSync(readFileSync(tarball)))) {
        if (entry.data) files.set(entry.path.replace(/^package\//, ''), entry.data)
      }
      const manifest = JSON.parse(new TextDecoder().decode(files.get('package.json'))) as PackageJson
      packed.set(name, { tarball, files, manifest })
    }

    app = join(work, 'app')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'packaging-check', private: true, type: 'module' }))
    run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--loglevel=error', ...PACKAGES.map((name) => packed.get(name)!.tarball)],
      { cwd: app },
    )
  }, 600_000)

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true })
  })

  /**
   * A project that installs the packed core under PGlite's name beside
   * `dependencies`, with npm's --strict-peer-deps (a peer range the version
   * does not meet fails the install).
   */
  function aliasedProject(name: string, dependencies: Record<string, string>, overrides?: Record<string, unknown>): string {
    const dir = join(work, name)
    mkdirSync(dir)
    const core = `file:${packed.get('pglite')!.tarball}`
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name, private: true, type: 'module', dependencies: { '@electric-sql/pglite': core, ...dependencies }, ...(overrides ? { overrides } : {}) }),
    )
    run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--strict-peer-deps'], { cwd: dir })
    return dir
  }

  /** Runs `source` as an ES module in `dir`; its JSON output. */
  function runScript(dir: string, source: string): unknown {
    const script = join(dir, 'script.mjs')
    writeFileSync(script, source)
    return JSON.parse(run(process.execPath, [script], { cwd: dir }))
  }

  /** Type-checks `source` in `dir` under `strict`, against the types npm installed there. */
  function typeCheck(dir: string, source: string): void {
    writeFileSync(join(dir, 'typed.ts'), source)
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', skipLibCheck: true, typeRoots: [join(repo, 'node_modules', '@types')], types: ['node'] },
        files: ['typed.ts'],
      }),
    )
    run(process.execPath, [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { cwd: dir })
  }

  it('installs the core under the name @electric-sql/pglite beside drizzle-orm with strict peer dependencies; drizzle-orm/pglite migrates, runs a transaction and CRUD on it, and type-checks with no cast', () => {
    // drizzle-orm's peer range for @electric-sql/pglite is `>=0.2.0`.
    const dir = aliasedProject('drizzle', { 'drizzle-orm': '0.45.4' })
    // engine: only ours has lockSessionUser, so this ran on pgwasm, not PGlite.
    expect(runScript(dir, DRIZZLE_SCRIPT)).toEqual({ rows: [{ body: 'first' }, { body: 'changed' }], migrations: 1, engine: 'function' })
    // Its statements are cached by SQL text: the reset must not show (no "cache lookup failed for type").
    expect(runScript(dir, DRIZZLE_ENUM_RESET_SCRIPT)).toEqual({ first: [{ m: 'sad' }], second: [{ m: 'sad' }], third: [{ m: 'glad' }] })
    typeCheck(dir, DRIZZLE_TS)
  }, 300_000)

  it('runs kysely through kysely-pglite-dialect on the core installed as @electric-sql/pglite: migration, transaction, CRUD, and type-checks with no cast', () => {
    // kysely-pglite-dialect's peer range (^0.2 || ^0.3 || ^0.4) rejects PGlite 0.5 too;
    // an override points it at the root's package, and keeps the core's own engine dependency.
    const dir = aliasedProject(
      'kysely',
      { kysely: '0.29.9', 'kysely-pglite-dialect': '1.3.1' },
      { 'kysely-pglite-dialect': { '@electric-sql/pglite': { '.': '$@electric-sql/pglite', '@electric-sql/pglite': '0.5.16' } } },
    )
    expect(runScript(dir, KYSELY_SCRIPT)).toEqual({ migrated: ['001_notes:Success'], rows: [{ body: 'changed' }], engine: 'function' })
    typeCheck(dir, KYSELY_TS)
  }, 300_000)

  describe.each(PACKAGES)('packages/%s', (name) => {
    it('ships only the built files, a readme and a license: no build info, no test files, no empty files', () => {
      const { files } = packed.get(name)!
      const paths = [...files.keys()]
      expect(paths).toContain('package.json')
      expect(paths).toContain('README.md')
      expect(paths).toContain('LICENSE')
      expect(paths.filter((p) => !p.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE'].includes(p))).toEqual([])
      expect(paths.filter((p) => p.includes('tsbuildinfo'))).toEqual([])
      expect(paths.filter((p) => /(^|\/)(tests?|__tests__|fixtures)\/|\.(test|spec)\.[cm]?[jt]s$/.test(p))).toEqual([])
      expect(paths.filter((p) => files.get(p)!.byteLength === 0)).toEqual([])
    })

    it('ships source maps only where they map something, and names no map it lacks', () => {
      const { files } = packed.get(name)!
      const decoder = new TextDecoder()
      const empty: string[] = []
      const dangling: string[] = []
      for (const [path, bytes] of files) {
        if (path.endsWith('.map')) {
          const map = JSON.parse(decoder.decode(bytes)) as { sources?: unknown[] }
          if (!map.sources?.length) empty.push(path)
        } else if (/\.[cm]?js$/.test(path)) {
          const named = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(decoder.decode(bytes))?.[1]
          if (named && !files.has(join(dirname(path), named))) dangling.push(`${path} -> ${named}`)
        }
      }
      expect(empty).toEqual([])
      expect(dangling).toEqual([])
    })

    it('names its sibling packages by version, not by workspace range', () => {
      const { manifest } = packed.get(name)!
      const core = packed.get('pglite')!.manifest
      for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies'] as const) {
        for (const [dep, range] of Object.entries(manifest[field] ?? {})) {
          expect(range, `${field}.${dep}`).not.toMatch(/^workspace:/)
          if (dep === core.name) expect(range, `${field}.${dep}`).toBe(core.version)
        }
      }
    })

    it('has every file its exports map names, types included', () => {
      const pkg = packed.get(name)!
      const missing: string[] = []
      for (const { subpath, targets } of subpaths(pkg)) {
        for (const [condition, target] of targets) {
          if (!pkg.files.has(target.replace(/^\.\//, ''))) missing.push(`${subpath} [${condition}] ${target}`)
        }
      }
      expect(missing).toEqual([])
    })

    it('loads every export with import(), and with require() where the map has a require condition', () => {
      const pkg = packed.get(name)!
      const wanted: { specifier: string; via: 'import' | 'require' }[] = []
      for (const { subpath, targets } of subpaths(pkg)) {
        const spec = specifier(pkg.manifest.name, subpath)
        const keys = [...targets.keys()]
        if (keys.some((k) => k === 'default' || k.startsWith('import'))) wanted.push({ specifier: spec, via: 'import' })
        if (keys.some((k) => k === 'default' || k.startsWith('require'))) wanted.push({ specifier: spec, via: 'require' })
      }
      const script = join(app, 'import-exports.mjs')
      writeFileSync(script, IMPORT_SCRIPT)
      const results = JSON.parse(run(process.execPath, [script, JSON.stringify(wanted)], { cwd: app })) as ImportResult[]
      expect(results.map((r) => `${r.via} ${r.specifier}`)).toEqual(wanted.map((w) => `${w.via} ${w.specifier}`))
      expect(results.filter((r) => r.error !== undefined)).toEqual([])
      // A module that loads but exports nothing is an entry that lost its code.
      expect(results.filter((r) => r.keys!.length === 0).map((r) => `${r.via} ${r.specifier}`)).toEqual([])
    })

    it('runs each of its bins from node_modules/.bin with --help', () => {
      const { manifest } = packed.get(name)!
      const bins = Object.keys(manifest.bin ?? {})
      expect(bins).toEqual(expect.arrayContaining([...EXPECTED_BINS[name]]))
      for (const bin of bins) {
        const help = run(join(app, 'node_modules', '.bin', bin), ['--help'], { cwd: app })
        expect(help, bin).toContain(bin)
      }
    })
  })

  it('runs a query with the installed core, from ESM and from CJS, starting from the shipped template: initdb never runs in a fresh install', () => {
    const script = join(app, 'query.mjs')
    writeFileSync(script, QUERY_SCRIPT)
    // An empty cache of our own, as after `npm i`. A template entry appears
    // in it only when initdb ran (template.ts): the package ships the
    // default template, so only the start-up snapshot may be written.
    const cache = join(work, 'cache')
    mkdirSync(cache)
    const env = { ...process.env, PGWASM_CACHE_DIR: cache }
    const rows = JSON.parse(run(process.execPath, [script], { cwd: app, env })) as unknown
    expect(rows).toEqual([[{ source: 'packed' }], [{ source: 'packed' }]])
    const entries = readdirSync(cache)
    expect(entries.filter((f) => f.startsWith('template-'))).toEqual([])
    expect(entries.filter((f) => /^snapshot-\w+\.bin$/.test(f))).toHaveLength(1)
    const cacheBytes = entries.reduce((sum, f) => sum + statSync(join(cache, f)).size, 0)
    expect(cacheBytes).toBeLessThan(200 * 1024 * 1024)
  }, 120_000)

  /** Runs a first create in `app` with `cache` as its cache: when it started, when its Postgres booted, and what a table in it counts. */
  function firstStart(cache: string): { started: number; booted: number; who: string; count: number } {
    const script = join(app, 'first-start.mjs')
    writeFileSync(
      script,
      `const started = Date.now()
const { PGlite } = await import('@pgwasm/pglite')
const db = await PGlite.create()
const { rows } = await db.query("select extract(epoch from pg_postmaster_start_time()) * 1000 as booted, current_user as who")
await db.exec('create table t (id int primary key); insert into t values (1), (2)')
const count = (await db.query('select count(*)::int as n from t')).rows[0].n
await db.close()
process.stdout.write(JSON.stringify({ started, booted: Number(rows[0].booted), who: rows[0].who, count }))`,
    )
    return JSON.parse(run(process.execPath, [script], { cwd: app, env: { ...process.env, PGWASM_CACHE_DIR: cache } })) as ReturnType<typeof firstStart>
  }

  /** The start-up snapshot the installed core ships: its path, and the cache entry it stands for. */
  function shippedSnapshot(): { file: string; entry: string } {
    const engineDir = join(app, 'node_modules', '@pgwasm', 'pglite', 'dist', 'engine')
    const shipped = readdirSync(engineDir).filter((f) => /^snapshot-[0-9a-f]+\.bin\.gz$/.test(f))
    expect(shipped).toHaveLength(1)
    return { file: join(engineDir, shipped[0]!), entry: shipped[0]!.slice(0, -'.gz'.length) }
  }

  it("restores a fresh install's first create() from the start-up snapshot the package ships: Postgres does not boot in the user's process, and the cache keeps a copy", () => {
    const cache = join(work, 'first-start-cache')
    mkdirSync(cache)
    const out = firstStart(cache)
    // A Postgres booted here would have started after the script did; the shipped one started when the package was built.
    expect(out.booted).toBeLessThan(out.started)
    expect(out).toMatchObject({ who: 'postgres', count: 2 })
    const { file, entry } = shippedSnapshot()
    expect(Buffer.compare(readFileSync(join(cache, entry)), gunzipSync(readFileSync(file)))).toBe(0)
  }, 120_000)

  it('boots instead when the shipped start-up snapshot is damaged (cut short, or not a snapshot), keeps none of it, and the next process restores what the boot saved', () => {
    const { file, entry } = shippedSnapshot()
    const original = readFileSync(file)
    const body = Buffer.from('not a snapshot at all, but of a plausible length')
    const head = Buffer.alloc(8)
    head.writeUInt32LE(body.byteLength, 0)
    const damaged = [original.subarray(0, original.byteLength >> 1), gzipSync(Buffer.concat([head, body]))]
    try {
      for (const [i, bytes] of damaged.entries()) {
        writeFileSync(file, bytes)
        const cache = join(work, `damaged-start-cache-${i}`)
        mkdirSync(cache)
        const first = firstStart(cache)
        // Booted in this process: it started after the script did.
        expect(first.booted).toBeGreaterThanOrEqual(first.started)
        expect(first).toMatchObject({ who: 'postgres', count: 2 })
        // What the cache holds is the booted start's, which the next process restores (same start time), not the damaged bytes.
        expect(readFileSync(join(cache, entry)).includes(body)).toBe(false)
        const second = firstStart(cache)
        expect(second.booted).toBe(first.booted)
        expect(second.count).toBe(2)
      }
    } finally {
      writeFileSync(file, original)
    }
  }, 180_000)
})
