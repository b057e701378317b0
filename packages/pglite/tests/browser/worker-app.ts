// An app of tests/browser-download.test.ts: the package in a worker
// (core-worker.ts), the page only its client; an in-memory, an idb:// and
// an opfs-ahp:// database, each answering one query.
import { PGliteWorker } from '@pgwasm/pglite/worker'

async function firstAnswers(): Promise<number[]> {
  const answers: number[] = []
  for (const dataDir of ['memory://', 'idb://worker-app', 'opfs-ahp://worker-app']) {
    const db = await PGliteWorker.create(new Worker(new URL('./core-worker.js', import.meta.url), { type: 'module' }), { dataDir })
    answers.push((await db.query<{ n: number }>('select 1 + 1 as n')).rows[0]!.n)
    await db.close()
  }
  return answers
}

Object.assign(globalThis, { firstAnswers: firstAnswers() })
