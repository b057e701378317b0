import { PGlite } from '../dist/index.js'
const dir = process.argv[2]!
if (process.argv[3] === 'make') {
  const db = await PGlite.create(dir)
  await db.exec('create table t (id int primary key, v text); insert into t select g, md5(g::text) from generate_series(1,1000) g')
  await db.close()
} else {
  const t0 = performance.now()
  const db = await PGlite.create(dir)
  const t1 = performance.now()
  const r = await db.query('select count(*) from t')
  const t2 = performance.now()
  await db.close()
  console.log(JSON.stringify({ create: +(t1 - t0).toFixed(1), firstQuery: +(t2 - t1).toFixed(1), close: +(performance.now() - t2).toFixed(1), rows: r.rows }))
}
