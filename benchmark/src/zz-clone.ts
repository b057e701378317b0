import { PGlite } from '@pgwasm/pglite'
const t0 = performance.now()
const db = await PGlite.create(process.env.SB ? { postgresqlConf: { shared_buffers: process.env.SB } } : {})
console.log('create', (performance.now() - t0).toFixed(1))
const t1 = performance.now()
await db.exec(`create table t (id int primary key, a text); insert into t select g, 'row ' || g from generate_series(1, 1000) g`)
console.log('exec', (performance.now() - t1).toFixed(1))
for (let i = 0; i < 4; i++) {
  const t = performance.now()
  const copy = await db.clone()
  const c = performance.now() - t
  await copy.query('select count(*) from t')
  await copy.close()
  console.log('clone', c.toFixed(1))
}
await db.close()
