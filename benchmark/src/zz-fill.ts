import { PGlite } from '@pgwasm/pglite'
const dbs = []
for (let i = 0; i < 8; i++) {
  const t = performance.now()
  dbs.push(await PGlite.create())
  console.log('create', (performance.now() - t).toFixed(1))
  await new Promise((r) => setTimeout(r, 400))
}
for (const d of dbs) await d.close()
