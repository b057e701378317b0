// The several-tabs page of tests/browser-react.test.ts: @electric-sql/pglite-react
// on a PGliteWorker with the live extension, on an idb:// database every tab
// of the test opens (`?db=<name>`). A write in one tab re-renders the others.
import { PGliteProvider } from '@electric-sql/pglite-react'
import { live } from '@pgwasm/pglite/live'
import { PGliteWorker } from '@pgwasm/pglite/worker'
import { createRoot } from 'react-dom/client'
import { TODO_TABLE, Todos } from './todos.js'

const name = new URLSearchParams(location.search).get('db') ?? 'react-tabs'
const pg = await PGliteWorker.create(new Worker('/pg-worker.js', { type: 'module' }), { dataDir: `idb://${name}`, extensions: { live } })
await pg.exec(TODO_TABLE)
createRoot(document.getElementById('root')!).render(
  <PGliteProvider db={pg}>
    <Todos />
  </PGliteProvider>,
)
;(globalThis as unknown as { pgwasmReactTabs: unknown }).pgwasmReactTabs = {
  exec: async (sql: string): Promise<void> => {
    await pg.exec(sql)
  },
  isLeader: (): boolean => pg.isLeader,
}
