// The page of tests/browser-react.test.ts: @electric-sql/pglite-react's
// provider and hooks on our PGlite, bundled as a user who switched would
// bundle them (its `@electric-sql/pglite` imports aliased to ours).
import { PGliteProvider } from '@electric-sql/pglite-react'
import { PGlite } from '@pgwasm/pglite'
import { live } from '@pgwasm/pglite/live'
import { createRoot } from 'react-dom/client'
import { TODO_TABLE, Todos } from './todos.js'

const db = await PGlite.create({ extensions: { live } })
await db.exec(TODO_TABLE)
createRoot(document.getElementById('root')!).render(
  <PGliteProvider db={db}>
    <Todos />
  </PGliteProvider>,
)
;(globalThis as unknown as { pgwasmReact: unknown }).pgwasmReact = {
  exec: async (sql: string): Promise<void> => {
    await db.exec(sql)
  },
}
