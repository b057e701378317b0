import { describe, expect, it } from 'vitest'
import { ClosedError, EngineError, MemoryFS, PGlite } from '../src/index.js'
import type { DumpCompression } from '../src/fs/dump.js'

// What PGlite code relies on beyond names: the `fs` option's life cycle,
// `defaultStartParams`, describeQuery's parsers, the closed-instance error.
describe('PGlite behaviours behind the same names', () => {
  it('runs an `fs` object: init before the engine, closeFs after it, a dump through it', async () => {
    const calls: string[] = []
    class CountingFS extends MemoryFS {
      override async init(pg: Parameters<MemoryFS['init']>[0], opts: Record<string, unknown>) {
        calls.push('init')
        return super.init(pg, opts)
      }
      override async closeFs() {
        calls.push('closeFs')
      }
    }
    const fs = new CountingFS()
    const db = new PGlite({ fs })
    await db.waitReady
    expect(calls).toEqual(['init'])
    await db.exec('create table t (v int); insert into t values (1)')
    const dump = await fs.dumpTar('t', 'none' as DumpCompression)
    expect(dump.size).toBeGreaterThan(1024)
    await db.close()
    expect(calls).toEqual(['init', 'closeFs'])
    expect(() => new PGlite('./elsewhere', { fs: new MemoryFS() })).toThrow(EngineError)
  })

  it('starts with defaultStartParams as startParams', async () => {
    expect(PGlite.defaultStartParams).toContain('exit_on_error=false')
    const db = await PGlite.create({ startParams: [...PGlite.defaultStartParams] })
    expect((await db.query<{ n: number }>('select 1 as n')).rows).toEqual([{ n: 1 }])
    await db.close()
  })

  it('describeQuery gives every result field a parser, text ones returning their input', async () => {
    const db = await PGlite.create()
    const d = await db.describeQuery('select $1::int as i, $2::text as t')
    expect(d.resultFields.map((f) => f.parser('42', f.dataTypeID))).toEqual([42, '42'])
    await db.close()
  })

  it('rejects calls on a closed instance with ClosedError "PGlite is closed"', async () => {
    const db = await PGlite.create()
    await db.close()
    const err = await db.query('select 1').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ClosedError)
    expect((err as Error).message).toBe('PGlite is closed')
  })
})

describe('copyToFS and Module', () => {
  it('writes a file SQL can read, and shows the engine memory initialMemory asked for', async () => {
    const db = await PGlite.create({ initialMemory: 256 * 1024 * 1024 })
    expect(db.Module.HEAPU8.buffer.byteLength).toBe(256 * 1024 * 1024)
    await db.copyToFS('/tmp/hello.txt', new TextEncoder().encode('hi from the host'))
    expect((await db.query(`select pg_read_file('/tmp/hello.txt') as t`)).rows).toEqual([{ t: 'hi from the host' }])
    await expect(db.copyToFS('relative.txt', new Uint8Array(1))).rejects.toBeInstanceOf(TypeError)
    await db.close()
  })
})
