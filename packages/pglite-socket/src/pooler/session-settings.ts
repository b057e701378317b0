import type { EngineLease } from '@pgwasm/pglite'
import { dollarQuote } from '../sql/quoting.js'
import { concat, decodeUtf8, forEachFrame, queryMessage, readInt32 } from '../wire/wire.js'

/*
 * Each client's own session settings on the one shared session, the way a
 * transaction pooler restores them on a server connection: a client's
 * settings (its startup parameters, then whatever its SETs left) are read
 * after a batch that may have changed them, and put back with RESET and
 * set_config() when it takes the engine after a client whose settings
 * differ. Clients that never change a setting cost nothing.
 */

/** A client's settings: name -> value as `pg_settings.setting` has it. */
export type ClientSettings = ReadonlyMap<string, string>

export const NO_SETTINGS: ClientSettings = new Map()

const keys = new WeakMap<ClientSettings, string>()

/** Whether two clients' settings are the same (psql or pgbench clients all send the same startup parameters). */
export function sameSettings(a: ClientSettings, b: ClientSettings): boolean {
  return a === b || (a.size === b.size && settingsKey(a) === settingsKey(b))
}

function settingsKey(settings: ClientSettings): string {
  let key = keys.get(settings)
  if (key === undefined) keys.set(settings, (key = JSON.stringify([...settings].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))))
  return key
}

/**
 * Startup parameters that are not settings, and settings a client must not
 * carry over: who it is (locked by the server or the engine) and what only
 * lives inside a transaction.
 */
const NOT_SETTINGS = new Set(['user', 'database', 'replication', 'options', 'session_authorization', 'role', 'is_superuser'])

/** Whether a client may carry `name` (lower case) as a setting of its own: not who it is, nor a startup parameter that is no setting. */
export function isClientSetting(name: string): boolean {
  return !NOT_SETTINGS.has(name)
}

/** The settings a startup packet asks for: its parameters, and `-c name=value` in `options`. */
export function startupSettings(params: ReadonlyMap<string, string>): ClientSettings {
  const settings = new Map<string, string>()
  for (const [name, value] of params) if (isClientSetting(name.toLowerCase())) settings.set(name.toLowerCase(), value)
  const options = params.get('options')
  if (options) {
    // libpq's rules: words split on unescaped spaces; `-c name=value` or `--name=value`.
    const words = options.match(/(?:\\.|\S)+/g)?.map((w) => w.replace(/\\(.)/g, '$1')) ?? []
    for (let i = 0; i < words.length; i++) {
      let setting: string | undefined
      if (words[i] === '-c') setting = words[++i]
      else if (words[i]!.startsWith('-c')) setting = words[i]!.slice(2)
      else if (words[i]!.startsWith('--')) setting = words[i]!.slice(2)
      const eq = setting?.indexOf('=') ?? -1
      if (setting && eq > 0) {
        const name = setting.slice(0, eq).replaceAll('-', '_').toLowerCase()
        if (isClientSetting(name)) settings.set(name, setting.slice(eq + 1))
      }
    }
  }
  return settings
}

// SET SESSION AUTHORIZATION and SET ROLE are a client's own too (is_superuser
// follows them). pg_settings does not list them: read by name, always, so
// that clients that did not change them all read the same.
const READ = queryMessage(
  `select (pg_catalog.jsonb_build_object('session_authorization', pg_catalog.current_setting('session_authorization'), 'role', pg_catalog.current_setting('role')) || ` +
    `coalesce(pg_catalog.jsonb_object_agg(name, setting), '{}'))::text from pg_catalog.pg_settings ` +
    `where source in ('session', 'client') and name not in ('is_superuser', 'transaction_isolation', 'transaction_read_only', 'transaction_deferrable')`,
)

/** The session's settings as they stand (read right after the client's batch, before anyone else runs). */
/**
 * What the session user and role are when nobody changed them: left out of
 * every client's settings (so clients that did not change them compare
 * equal), and put back with RESET. `user` is learnt from the first read,
 * made before any client ran.
 */
export interface SessionDefaults {
  user?: string
}

export function readClientSettings(lease: EngineLease, defaults: SessionDefaults): ClientSettings {
  const chunks: Uint8Array[] = []
  lease.execProtocolRawStream(READ, (bytes) => chunks.push(bytes.slice()))
  const reply = concat(chunks)
  let json: string | undefined
  forEachFrame(reply, (type, start, end) => {
    // DataRow: one column, its length, then the text.
    if (type === 0x44 && end - start > 6) json = decodeUtf8(reply.subarray(start + 6, start + 6 + readInt32(reply, start + 2)))
  })
  if (json === undefined) return NO_SETTINGS
  const settings = new Map(Object.entries(JSON.parse(json) as Record<string, string>))
  defaults.user ??= settings.get('session_authorization')
  if (settings.get('session_authorization') === defaults.user) settings.delete('session_authorization')
  if (settings.get('role') === 'none') settings.delete('role')
  return settings
}

/**
 * Settings that change neither how SQL parses and plans nor what names
 * resolve to: only how results are sent, or limits on running.
 */
const MEANING_NEUTRAL = new Set([
  'application_name',
  'client_encoding',
  'client_min_messages',
  'extra_float_digits',
  'bytea_output',
  'statement_timeout',
  'lock_timeout',
  'idle_in_transaction_session_timeout',
  'idle_session_timeout',
  'transaction_timeout',
  'default_transaction_isolation',
  'default_transaction_read_only',
  'default_transaction_deferrable',
  'synchronous_commit',
  'work_mem',
  'maintenance_work_mem',
])

/** Whether going from `current` to `wanted` changes a setting that may change what SQL means. */
export function meaningChanges(wanted: ClientSettings, current: ClientSettings): boolean {
  for (const [name, value] of wanted) if (current.get(name) !== value && !MEANING_NEUTRAL.has(name)) return true
  for (const name of current.keys()) if (!wanted.has(name) && !MEANING_NEUTRAL.has(name)) return true
  return false
}

/**
 * Turns the session's settings from `current` into `wanted`: a RESET of
 * each one `wanted` lacks, then each of `wanted`. A setting the engine
 * refuses (an unknown startup parameter, a superuser-only one under a
 * locked role) is skipped, as Postgres skips a bad `options` setting.
 * Custom settings (`x.y`) are not in pg_settings, so they stay shared.
 */
export function applyClientSettings(lease: EngineLease, wanted: ClientSettings, current: ClientSettings): void {
  let body = ''
  // RESET session_authorization resets the role too: it goes last.
  const gone = [...current.keys()].filter((name) => !wanted.has(name)).sort((a, b) => Number(a === 'session_authorization') - Number(b === 'session_authorization'))
  for (const name of gone) {
    body += ` BEGIN EXECUTE pg_catalog.format('RESET %I', ${dollarQuote(name)}); EXCEPTION WHEN OTHERS THEN NULL; END;`
  }
  // Setting session_authorization resets the role: it goes first.
  const order = [...wanted].sort(([a], [b]) => Number(b === 'session_authorization') - Number(a === 'session_authorization'))
  for (const [name, value] of order) {
    if (current.get(name) !== value) {
      body += ` BEGIN PERFORM pg_catalog.set_config(${dollarQuote(name)}, ${dollarQuote(value)}, false); EXCEPTION WHEN OTHERS THEN NULL; END;`
    }
  }
  // The body holds clients' values too: its own quotes get a tag none of them contains.
  if (body !== '') lease.execProtocolRawStream(queryMessage(`DO ${dollarQuote(`BEGIN${body} END`, 'pgwasm')}`), ignore)
}

function ignore(): void {}
