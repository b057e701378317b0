import type { SuiteRun } from '../harness.js'

/** Placeholder rows until the Prisma driver adapter exists, so the table shows what is coming. */
export const PRISMA_CASES = ['findUnique by id', 'findMany 100 rows', 'create one', 'update one', 'interactive transaction']

export async function run(s: SuiteRun): Promise<{ status: 'not built'; reason: string }> {
  const reason = 'no pgwasm Prisma driver adapter is wired into the benchmark yet'
  for (const c of PRISMA_CASES) {
    if (s.wants(c)) s.mark({ case: c, path: 'pgwasm Prisma adapter', side: 'ours', unit: 'ms', status: 'not built', reason })
  }
  return { status: 'not built', reason }
}
