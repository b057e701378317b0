// The file-system classes of `@electric-sql/pglite` (root `MemoryFS`/`IdbFs`,
// `/nodefs`, `/basefs`, `/opfs-ahp`, `/memfs2opfs`, `/memfs-frontend`) from
// the built package: the built-in ones work against a real instance, the
// ones pgwasm does not run on reject with a documented error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EngineError, IdbFs, MemoryFS, PGlite } from '@pgwasm/pglite'
import { BaseFilesystem, ERRNO_CODES, EmscriptenBuiltinFilesystem, type FsStats } from '@pgwasm/pglite/basefs'
import { MemfsFrontendFS } from '@pgwasm/pglite/memfs-frontend'
import { Memfs2OpfsFS, OpfsBackend } from '@pgwasm/pglite/memfs2opfs'
import { NodeFS } from '@pgwasm/pglite/nodefs'
import { OpfsAhpFS } from '@pgwasm/pglite/opfs-ahp'

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
})

afterAll(async () => {
  await db.close()
})

describe('built-in file systems', () => {
  it('are EmscriptenBuiltinFilesystem subclasses', () => {
    for (const fs of [new MemoryFS(), new NodeFS('/tmp/x'), new IdbFs('name')]) expect(fs).toBeInstanceOf(EmscriptenBuiltinFilesystem)
  })

  it('dump the data directory of the instance they were given as a loadable tarball', async () => {
    await db.exec("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('here')")
    const fs = new MemoryFS()
    const { emscriptenOpts } = await fs.init(db, { marker: 1 })
    expect(emscriptenOpts).toEqual({ marker: 1 })
    const archive = await fs.dumpTar('memory', 'gzip')
    const copy = await PGlite.create({ loadDataDir: archive })
    try {
      expect((await copy.query('SELECT v FROM kept')).rows).toEqual([{ v: 'here' }])
    } finally {
      await copy.close()
    }
  })

  it('reject dumpTar before an instance gave them one', async () => {
    await expect(new NodeFS('/tmp/x').dumpTar('db')).rejects.toMatchObject({ name: 'EngineError', code: 'BAD_DATA_DIR' })
  })
})

describe('OpfsAhpFS', () => {
  it("stands for opfs-ahp://<name>, which needs a browser's dedicated worker: in Node it rejects with BAD_DATA_DIR saying so", async () => {
    const err = await PGlite.create({ fs: new OpfsAhpFS('db', { initialPoolSize: 4 }) }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(EngineError)
    expect(err).toMatchObject({ code: 'BAD_DATA_DIR' })
    expect((err as Error).message).toMatch(/opfs-ahp:\/\/db needs the origin private file system/)
  })
})

describe('file systems pgwasm does not run on', () => {
  const unsupported = [
    ['Memfs2OpfsFS', () => new Memfs2OpfsFS('db')],
    ['MemfsFrontendFS', () => new MemfsFrontendFS(new OpfsBackend('db'))],
  ] as const
  for (const [name, make] of unsupported) {
    it(`construct ${name} and reject its use with an EngineError naming it`, async () => {
      const err = await make()
        .init(db, {})
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(EngineError)
      expect(err).toMatchObject({ code: 'BAD_DATA_DIR' })
      expect((err as Error).message).toContain(name)
    })
  }

  it('reject dumpTar of a custom BaseFilesystem', async () => {
    class Custom extends BaseFilesystem {
      chmod(): void {}
      close(): void {}
      fstat(): FsStats {
        throw Object.assign(new Error('no'), { code: ERRNO_CODES.ENOENT })
      }
      lstat(): FsStats {
        throw Object.assign(new Error('no'), { code: ERRNO_CODES.ENOENT })
      }
      mkdir(): void {}
      open(): number {
        return 0
      }
      readdir(): string[] {
        return []
      }
      read(): number {
        return 0
      }
      rename(): void {}
      rmdir(): void {}
      truncate(): void {}
      unlink(): void {}
      utimes(): void {}
      writeFile(): void {}
      write(): number {
        return 0
      }
    }
    await expect(new Custom('/data').dumpTar('db')).rejects.toMatchObject({ name: 'EngineError', code: 'BAD_DATA_DIR' })
  })
})
