// The REPL page of tests/browser-react.test.ts: @electric-sql/pglite-repl's
// <Repl> on our PGlite, its `@electric-sql/pglite` imports aliased to ours.
import { Repl } from '@electric-sql/pglite-repl'
import { PGlite } from '@pgwasm/pglite'
import { createRoot } from 'react-dom/client'

const db = await PGlite.create()
await db.exec("create table planet (id int primary key, name text not null); insert into planet values (1, 'Mercury'), (2, 'Venus')")
createRoot(document.getElementById('root')!).render(<Repl pg={db} />)
;(globalThis as unknown as { pgwasmRepl: unknown }).pgwasmRepl = { ready: true }
