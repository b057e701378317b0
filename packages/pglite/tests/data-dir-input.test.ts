import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { tempDir as makeTempDir } from '@pgwasm/test-support/temp-dirs'
import { EngineError, PGlite, type PGliteOptions } from '../src/index.js'

const tempDir = (): string => makeTempDir('pgwasm-data-dir-')

async function openError(dataDir: unknown, options?: PGliteOptions): Promise<unknown> {
  return PGlite.create(dataDir as string, options).then(
    async (db) => {
      await db.close()
      return undefined
    },
    (err: unknown) => err,
  )
}

/** What a refused path must not leave behind: the cwd's entries (an unknown scheme used to become a folder there). */
function cwdEntries(): string[] {
  return readdirSync(process.cwd()).sort()
}

describe('the dataDir argument', () => {
  it('refuses an unknown scheme, naming the supported ones, and creates nothing', async () => {
    // Issue: `foo://bar` created a folder `foo:/bar` in the working directory.
    const before = cwdEntries()
    const err = await openError('foo://bar')
    expect(err).toBeInstanceOf(EngineError)
    expect(err).toMatchObject({ code: 'BAD_DATA_DIR' })
    expect((err as Error).message).toBe(
      '`dataDir` `foo://bar` has the unknown scheme `foo://`; supported: a path or `file://<path>` (Node), `memory://`, `idb://<name>` (browser), `opfs-ahp://<name>` (browser worker)',
    )
    expect(cwdEntries()).toEqual(before)
    expect(existsSync('foo:')).toBe(false)
  })

  it('refuses an unknown scheme given as options.dataDir', async () => {
    const err = await openError(undefined, { dataDir: 'https://example.com/db' })
    expect(err).toMatchObject({ name: 'EngineError', code: 'BAD_DATA_DIR' })
    expect((err as Error).message).toContain('unknown scheme `https://`')
  })

  it('refuses a dataDir that is not a string with a TypeError naming the option', async () => {
    // Issue: `42` failed with `TypeError: dataDir.startsWith is not a function`.
    const before = cwdEntries()
    const positional = await openError(42)
    const inOptions = await openError({ dataDir: 42 } as unknown as PGliteOptions)
    expect(positional).toBeInstanceOf(TypeError)
    expect((positional as Error).message).toBe(
      '`dataDir` must be a string (a path, or a `file://`, `memory://`, `idb://` or `opfs-ahp://` URL), got number 42',
    )
    expect(inOptions).toBeInstanceOf(TypeError)
    expect((inOptions as Error).message).toBe((positional as Error).message)
    expect(cwdEntries()).toEqual(before)
  })

  it('throws the TypeError from the constructor too', () => {
    expect(() => new PGlite(42 as unknown as string)).toThrow(TypeError)
    expect(() => new PGlite(new URL('file:///tmp/db') as unknown as string)).toThrow(/`dataDir` must be a string, got the URL file:\/\/\/tmp\/db/)
  })

  it('refuses two different data directories, creating neither', async () => {
    // Issue: `create('./a', { dataDir: './b' })` silently used `./a`.
    const parent = tempDir()
    const a = join(parent, 'a')
    const b = join(parent, 'b')
    const err = await openError(a, { dataDir: b })
    expect(err).toBeInstanceOf(EngineError)
    expect(err).toMatchObject({ code: 'BAD_DATA_DIR' })
    expect((err as Error).message).toBe(`two data directories: \`${a}\` as the first argument and \`${b}\` as \`options.dataDir\`; pass one`)
    expect(readdirSync(parent)).toEqual([])
    // In memory and on disk are two different places as well.
    expect(await openError('memory://', { dataDir: a })).toMatchObject({ code: 'BAD_DATA_DIR' })
    expect(readdirSync(parent)).toEqual([])
  })

  it('accepts the same data directory given twice, however it is spelled', async () => {
    const dir = join(tempDir(), 'db')
    const db = await PGlite.create(dir, { dataDir: `file://${dir}/` })
    try {
      expect(db.dataDir).toBe(dir)
      expect((await db.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
    } finally {
      await db.close()
    }
    const inMemory = await PGlite.create('memory://', { dataDir: 'memory://' })
    await inMemory.close()
  })

  it('fails at once on a path where mkdir never succeeds (under /proc), creating nothing', { timeout: 20_000, skip: !existsSync('/proc/self') }, async () => {
    // Issue: this hung forever at 90% CPU (Node's recursive mkdir retried the parent).
    const err = await openError('/proc/pgwasm-no-such/db')
    expect(err).toBeInstanceOf(EngineError)
    expect(err).toMatchObject({ code: 'BAD_DATA_DIR', cause: { code: 'ENOENT' } })
    expect((err as Error).message).toMatch(/^cannot create the data directory \/proc\/pgwasm-no-such\/db: ENOENT/)
    expect(existsSync('/proc/pgwasm-no-such')).toBe(false)
  })

  it('refuses a path below a file, creating nothing', async () => {
    const parent = tempDir()
    writeFileSync(join(parent, 'file'), 'x')
    const err = await openError(join(parent, 'file', 'sub', 'db'))
    expect(err).toBeInstanceOf(EngineError)
    expect(err).toMatchObject({ code: 'BAD_DATA_DIR' })
    expect((err as Error).message).toContain(`cannot create the data directory ${join(parent, 'file', 'sub', 'db')}`)
    expect(readdirSync(parent)).toEqual(['file'])
  })

  it('creates missing parent folders of a new data directory', async () => {
    const parent = tempDir()
    const dir = join(parent, 'x', 'y', 'db')
    const db = await PGlite.create(dir)
    await db.close()
    expect(existsSync(join(dir, 'PG_VERSION'))).toBe(true)
    // Postgres wants its own directory private; the parents get the default mode.
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    expect(statSync(join(parent, 'x')).mode & 0o777).toBe(0o777 & ~process.umask())
  })
})
