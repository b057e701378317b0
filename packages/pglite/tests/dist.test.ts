import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist')

interface Built {
  PGlite: { create(): Promise<{ query(sql: string): Promise<{ rows: unknown[] }>; close(): Promise<void> }> }
}

async function selectOne(mod: Built): Promise<unknown[]> {
  const db = await mod.PGlite.create()
  try {
    return (await db.query('select 1 as one')).rows
  } finally {
    await db.close()
  }
}

describe('built package (run `pnpm build` first; `pnpm test` does)', () => {
  it('has ESM, CJS and declaration entry points', () => {
    for (const file of ['index.js', 'index.cjs', 'index.d.ts', 'index.d.cts']) expect(existsSync(join(dist, file)), file).toBe(true)
  })

  it('runs a query through the ESM build', async () => {
    const mod = (await import(pathToFileURL(join(dist, 'index.js')).href)) as Built
    expect(await selectOne(mod)).toEqual([{ one: 1 }])
  })

  it('runs a query through the CJS build', async () => {
    const mod = createRequire(import.meta.url)(join(dist, 'index.cjs')) as Built
    expect(await selectOne(mod)).toEqual([{ one: 1 }])
  })
})
