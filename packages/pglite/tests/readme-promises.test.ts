import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, vi } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'
import { IncompatibleDataDirError, PGlite } from '../src/index.js'
import { unpackTar, packTar } from '../src/engine/files/tar.js'

const here = dirname(fileURLToPath(import.meta.url))

// Options the README promises, each checked for what it does.
describe('README promises of PGlite options', () => {
  it('relaxedDurability on a directory: commits with synchronous_commit off, and they are there after a close', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir, { relaxedDurability: true })
    expect((await db.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit).toBe('off')
    await db.exec('create table t (v int); insert into t values (1), (2)')
    await db.close()
    const again = await PGlite.create(dir)
    expect((await again.query<{ n: number }>('select count(*)::int as n from t')).rows).toEqual([{ n: 2 }])
    expect((await again.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit).toBe('on')
    await again.close()
  })

  it('debug above 0 sends the server log to console.debug', async () => {
    const lines: string[] = []
    const spy = vi.spyOn(console, 'debug').mockImplementation((line: unknown) => {
      lines.push(String(line))
    })
    try {
      const db = await PGlite.create(tempDir(), { debug: 1 })
      await db.close()
    } finally {
      spy.mockRestore()
    }
    expect(lines.length).toBeGreaterThan(0)
    expect(lines.every((l) => l.startsWith('[pgwasm] '))).toBe(true)
    expect(lines.some((l) => /database system is (ready|shut down)/.test(l))).toBe(true)
  })

  it('PGWASM_CACHE_DIR is where the template and snapshot cache goes', () => {
    const cache = tempDir()
    const script = `import { PGlite } from ${JSON.stringify(join(here, '..', 'src', 'index.ts'))}
const db = await PGlite.create(); await db.query('select 1'); await db.close()`
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: join(here, '..'),
      env: { ...process.env, PGWASM_CACHE_DIR: cache },
      encoding: 'utf8',
      timeout: 120_000,
    })
    expect(run.status, run.stderr).toBe(0)
    expect(readdirSync(cache).some((f) => /^(template|snapshot)-.*\.bin$/.test(f))).toBe(true)
  })

  it('loadDataDir of a tarball from another PostgreSQL major version rejects with IncompatibleDataDirError naming both', async () => {
    const source = await PGlite.create()
    const dump = new Uint8Array(await (await source.dumpDataDir('none')).arrayBuffer())
    await source.close()
    const tree = unpackTar(dump).map((e) => (e.path === 'PG_VERSION' ? { ...e, data: new TextEncoder().encode('15\n') } : e))
    const err = await PGlite.create({ loadDataDir: packTar(tree) }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(IncompatibleDataDirError)
    expect((err as Error).message).toMatch(/15/)
    expect((err as Error).message).toMatch(/18/)
  })
})
