// Build step of the browser bundle: writes the default initdb result as a
// gzipped tree image (tree-image.ts), so a page starts Postgres without running initdb (~1.5 s),
// and the engine binary rewritten so that its interrupt checks poll the host.
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { gzipSync } from 'node:zlib'
import { loadAssets } from '../src/engine/loading/assets.js'
import type { DataTree } from '../src/engine/files/pgdata-tree.js'
import { ARRAY_TYPES_SQL, getTemplate } from '../src/engine/start/template.js'
import { PGlite } from '../src/pglite.js'
import { builtinRecordsOf } from '../src/engine/hooks/client-functions.js'
import { guardRecordsOf } from '../src/engine/hooks/session-guards.js'
import { encodeTreeImage } from '../src/engine/files/tree-image.js'
import { addInterruptPolls } from '../src/engine/loading/interrupt-polls.js'

/** ControlFileData offsets (PostgreSQL 18, src/include/catalog/pg_control.h); keep in sync with the engine's major version. */
const STATE_OFFSET = 16
const CHECKPOINT_OFFSET = 32
/** `checkPointCopy.redo`: the CheckPoint struct follows `checkPoint`. */
const REDO_OFFSET = 40
const DB_SHUTDOWNED = 1
const WAL_PAGE = 8192
const WAL_SEGMENT = 16 * 1024 * 1024

/**
 * initdb leaves 7 MB of WAL before its final shutdown checkpoint, which
 * nothing reads again: a cleanly shut down cluster starts (and a later crash
 * recovers) from that checkpoint on. Zeroed, those pages drop out of the
 * image, which is half as large to ship and to inflate in every new page.
 * The segment's first page stays: Postgres validates it whenever it opens
 * the segment.
 */
function withoutSpentWal(tree: DataTree): DataTree {
  const control = tree.find((e) => e.path === 'global/pg_control')?.data
  if (!control) throw new Error('template has no global/pg_control')
  const view = new DataView(control.buffer, control.byteOffset, control.byteLength)
  if (view.getUint32(STATE_OFFSET, true) !== DB_SHUTDOWNED) return tree
  const checkpoint = view.getBigUint64(CHECKPOINT_OFFSET, true)
  const redo = view.getBigUint64(REDO_OFFSET, true)
  const from = checkpoint < redo ? checkpoint : redo
  const segment = Number(from / BigInt(WAL_SEGMENT))
  const name = `pg_wal/00000001${'00000000'}${segment.toString(16).toUpperCase().padStart(8, '0')}`
  const keepFrom = Math.floor(Number(from % BigInt(WAL_SEGMENT)) / WAL_PAGE) * WAL_PAGE
  return tree.map((e) => {
    if (e.path !== name || !e.data || keepFrom <= WAL_PAGE) return e
    const data = new Uint8Array(e.data)
    data.fill(0, WAL_PAGE, keepFrom)
    return { ...e, data }
  })
}

const [out, polledOut] = process.argv.slice(2)
if (!out || !polledOut) throw new Error('usage: make-template <out.pgwt.gz> <out.polled.wasm>')
// The engine binary with its interrupt checks polling the host (interrupt-polls.ts), shipped so no process rewrites it.
const polled = addInterruptPolls(readFileSync(createRequire(import.meta.url).resolve('@electric-sql/pglite/pglite.wasm')))
writeFileSync(polledOut, polled.bytes)
const assets = await loadAssets()
const tree = withoutSpentWal(await getTemplate(assets))
writeFileSync(out, gzipSync(encodeTreeImage(tree), { level: 9 }))
// The template catalog's array types, read from a database started from it.
const db = await PGlite.create()
const { rows } = await db.query<[number, number, string]>(ARRAY_TYPES_SQL, [], { rowMode: 'array' })
await db.close()
// Where that database's engine found the guarded settings' records: shipped, so a process need not search for them.
const settings = guardRecordsOf(assets.pgliteModule)
const builtins = builtinRecordsOf(assets.pgliteModule)
if (!settings || !builtins) throw new Error('the engine located no guarded settings or built-in functions')
const guardRecords = { ...settings, ...builtins }
console.log(JSON.stringify({ engineVersion: assets.engineVersion, arrayTypes: rows, guardRecords, interruptPollSlot: polled.pollSlot }))
