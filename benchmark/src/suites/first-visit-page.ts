// The page of the first-visit rows (browser-first-visit.ts): create an
// in-memory database, answer one query, note when (ms since navigation).
import { PGlite } from '@pgwasm/pglite'

const db = await PGlite.create()
const { rows } = await db.query<{ n: number }>('select 1 + 1 as n')
Object.assign(globalThis, { firstResult: { at: performance.now(), n: rows[0]!.n } })
