import { generateSpeedtest } from './speedtest-sql.js'
const which = process.argv[2] ?? 'ours'
const mod = which === 'ours' ? await import('@pgwasm/pglite') : await import('@electric-sql/pglite')
const db = await (mod as any).PGlite.create(process.env.SB ? { postgresqlConf: { shared_buffers: process.env.SB } } : {})
const w = generateSpeedtest(1)
const t0 = performance.now()
for (const x of w) {
  const s = performance.now()
  for (const b of x.batches) await db.exec(b)
  console.log(x.name, (performance.now() - s).toFixed(1))
}
console.log('total', (performance.now() - t0).toFixed(0))
await db.close()
