// The page of tests/browser-react.test.ts: @electric-sql/pglite-react's
// provider and hooks on our PGlite, bundled as a user who switched would
// bundle them (its `@electric-sql/pglite` imports aliased to ours).
import { PGliteProvider, useLiveIncrementalQuery, useLiveQuery, usePGlite } from '@electric-sql/pglite-react'
import { PGlite } from '@pgwasm/pglite'
import { live } from '@pgwasm/pglite/live'
import { createRoot } from 'react-dom/client'

interface Todo {
  id: number
  title: string
}

function Todos(): React.JSX.Element {
  const open = useLiveQuery<Todo>('select id, title from todo where not done order by id', [])
  const counted = useLiveQuery.sql<{ n: number }>`select count(*)::int as n from todo where title <> ${'hidden'}`
  const all = useLiveIncrementalQuery<Todo>('select id, title from todo order by id', [], 'id')
  const db = usePGlite()
  return (
    <div>
      <ul id="open">
        {open?.rows.map((t) => (
          <li key={t.id}>{t.title}</li>
        ))}
      </ul>
      <p id="count">{counted?.rows[0]?.n ?? 'loading'}</p>
      <ol id="all">
        {all?.rows.map((t) => (
          <li key={t.id}>{t.title}</li>
        ))}
      </ol>
      <button id="add" onClick={() => void db.query("insert into todo (title) values ('clicked')")}>
        add
      </button>
    </div>
  )
}

const db = await PGlite.create({ extensions: { live } })
await db.exec('create table todo (id serial primary key, title text not null, done boolean not null default false)')
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
