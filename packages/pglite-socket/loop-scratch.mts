import pg from 'pg'
import { spawn } from 'node:child_process'
const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', '--port', '0', '--role', 'app', '--max-memory', '384MB'], { stdio: ['ignore', 'pipe', 'inherit'] })
const url: string = await new Promise((res) => child.stdout!.on('data', (d) => { const m = /at (postgresql:\/\/\S+)/.exec(String(d)); if (m) res(m[1]!) }))
const c = new pg.Client({ connectionString: url }); await c.connect()
const t0 = performance.now()
const tries = (process.env.Q ?? '').split('|||')
for (const q of tries) {
  try { await c.query(q); console.log('ok', q.slice(0, 50), Math.round(performance.now() - t0)) } catch (e) { console.log('err', q.slice(0, 50), (e as any).code, (e as Error).message, Math.round(performance.now() - t0)) }
}
await c.end(); child.kill()
