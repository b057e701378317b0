// The live-query screen of the React test pages: @electric-sql/pglite-react's
// hooks (plain, sql-tagged, incremental) and usePGlite, on whichever instance
// the page's provider holds.
import { useLiveIncrementalQuery, useLiveQuery, usePGlite } from '@electric-sql/pglite-react'

export const TODO_TABLE = 'create table if not exists todo (id serial primary key, title text not null, done boolean not null default false)'

interface Todo {
  id: number
  title: string
}

export function Todos(): React.JSX.Element {
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
