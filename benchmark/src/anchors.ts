import { errorText } from './harness.js'

/** A dependency that loaded, or why it did not (printed as the skip reason). */
export type Loaded<T> = { ok: true; value: T } | { ok: false; reason: string }

/** What the benchmarks use of both PGlite implementations; both classes satisfy it. */
export interface PgliteLike {
  query(sql: string, params?: unknown[], options?: { rowMode?: 'array' | 'object' }): Promise<{ rows: unknown[] }>
  exec(sql: string): Promise<unknown>
  execProtocolRawStream(message: Uint8Array, options: { onRawData: (data: Uint8Array) => void }): Promise<void>
  clone(): Promise<PgliteLike>
  close(): Promise<void>
}

export interface PgliteImpl {
  /** Row label prefix: "pgwasm" or "PGlite". */
  label: string
  side: 'ours' | 'anchor'
  create(dataDir?: string): Promise<PgliteLike>
}

async function attempt<T>(load: () => Promise<T>, hint: string): Promise<Loaded<T>> {
  try {
    return { ok: true, value: await load() }
  } catch (err) {
    return { ok: false, reason: `${hint}: ${errorText(err)}` }
  }
}

export function loadOurs(): Promise<Loaded<PgliteImpl>> {
  return attempt(async () => {
    const { PGlite } = await import('@pgwasm/pglite')
    return { label: 'pgwasm', side: 'ours', create: (dir) => PGlite.create(dir) as Promise<PgliteLike> } satisfies PgliteImpl
  }, '@pgwasm/pglite did not load (run `pnpm --filter @pgwasm/pglite run build`)')
}

export function loadPglite(): Promise<Loaded<PgliteImpl>> {
  return attempt(async () => {
    const { PGlite } = await import('@electric-sql/pglite')
    return {
      label: 'PGlite',
      side: 'anchor',
      create: (dir) => PGlite.create(dir) as unknown as Promise<PgliteLike>,
    } satisfies PgliteImpl
  }, '@electric-sql/pglite did not load')
}

export type SqliteDatabase = import('better-sqlite3').Database
export type SqliteCtor = new (filename: string) => SqliteDatabase

/** Opening a database proves the native addon was built for this Node. */
export function loadSqlite(): Promise<Loaded<SqliteCtor>> {
  return attempt(async () => {
    const mod = (await import('better-sqlite3')) as unknown as { default: SqliteCtor }
    const Database = mod.default
    new Database(':memory:').close()
    return Database
  }, 'better-sqlite3 native addon unavailable (its install script builds it with node-gyp; is it in onlyBuiltDependencies?)')
}

export type PgClient = import('pg').Client

export function loadPg(): Promise<Loaded<typeof import('pg')>> {
  return attempt(async () => {
    const mod = (await import('pg')) as unknown as { default: typeof import('pg') }
    return mod.default
  }, 'pg did not load')
}

/** Connects a `pg` client to the native server, or says why native rows are skipped. */
export async function connectNative(url: string | null, reason: string): Promise<Loaded<PgClient>> {
  if (!url) return { ok: false, reason }
  const pg = await loadPg()
  if (!pg.ok) return pg
  return attempt(async () => {
    const client = new pg.value.Client({ connectionString: url })
    await client.connect()
    return client
  }, `native PostgreSQL at ${redact(url)} unreachable`)
}

export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@')
}
