// An app of tests/browser-download.test.ts: the package on the page, an
// in-memory and an idb:// database, each answering one query.
import { PGlite } from '@pgwasm/pglite'

async function firstAnswers(): Promise<number[]> {
  const answers: number[] = []
  for (const dataDir of ['memory://', 'idb://page-app']) {
    const db = await PGlite.create({ dataDir })
    answers.push((await db.query<{ n: number }>('select 1 + 1 as n')).rows[0]!.n)
    await db.close()
  }
  return answers
}

Object.assign(globalThis, { firstAnswers: firstAnswers() })
