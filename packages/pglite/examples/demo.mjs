// `pnpm start`: an in-memory Postgres, a table, some rows, a query.
import { PGlite } from '@pgwasm/pglite'

const started = performance.now()
const db = await PGlite.create()
console.log(`PostgreSQL ${(await db.query('show server_version')).rows[0].server_version} ready in ${Math.round(performance.now() - started)} ms`)

await db.exec(`
  create table todo (id serial primary key, title text not null, done boolean default false);
  insert into todo (title) values ('write the README'), ('ship it');
`)
await db.query('update todo set done = $1 where id = $2', [true, 1])
const { rows } = await db.query('select id, title, done from todo order by id')
console.table(rows)
await db.close()
