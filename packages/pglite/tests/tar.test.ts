import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { tempDir as makeTempDir } from '@pgwasm/test-support/temp-dirs'
import type { TreeEntry } from '../src/engine/files/pgdata-tree.js'
import { isGzip, packTar, TarError, unpackTar } from '../src/engine/files/tar.js'

const DIR = 0o040000
const REG = 0o100000
const MTIME = 1_700_000_000_000

const dirEntry = (p: string, perm = 0o755): TreeEntry => ({ path: p, mode: DIR | perm, mtimeMs: MTIME })
const fileEntry = (p: string, data: Uint8Array | string, perm = 0o644): TreeEntry => ({
  path: p,
  mode: REG | perm,
  mtimeMs: MTIME,
  data: typeof data === 'string' ? new TextEncoder().encode(data) : data,
})

function sameBytes(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  if (!a || !b) return a === b
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))
}

/** Compares trees without deep-diffing megabytes of data. */
function expectSameTree(actual: readonly TreeEntry[], expected: readonly TreeEntry[]): void {
  expect(actual.map((e) => [e.path, e.mode.toString(8), e.mtimeMs, e.data?.length])).toEqual(
    expected.map((e) => [e.path, e.mode.toString(8), e.mtimeMs, e.data?.length]),
  )
  for (let i = 0; i < expected.length; i++) {
    expect(sameBytes(actual[i]!.data, expected[i]!.data), expected[i]!.path).toBe(true)
  }
}

/** Rewrites a header's checksum after a test edits its fields. */
function fixChecksum(buf: Uint8Array, at: number): void {
  buf.fill(0x20, at + 148, at + 156)
  let sum = 0
  for (let i = at; i < at + 512; i++) sum += buf[i]!
  buf.set(new TextEncoder().encode(sum.toString(8).padStart(6, '0') + '\0 '), at + 148)
}

const longDir = `base/${'d'.repeat(60)}/${'e'.repeat(60)}`
const longFile = `${longDir}/${'f'.repeat(80)}`

function sampleTree(): TreeEntry[] {
  const big = new Uint8Array(randomBytes(1024 * 1024))
  const exact = new Uint8Array(randomBytes(512 * 3))
  return [
    fileEntry('PG_VERSION', '17\n', 0o600),
    dirEntry('base', 0o700),
    dirEntry('base/1', 0o700),
    fileEntry('base/1/empty', new Uint8Array(0), 0o600),
    fileEntry('base/1/big', big, 0o600),
    fileEntry('base/1/exact', exact, 0o640),
    dirEntry('base/1/nested', 0o755),
    dirEntry('base/1/nested/deeper', 0o755),
    fileEntry('base/1/nested/deeper/leaf', 'leaf'),
    dirEntry('ünïcödé', 0o750),
    fileEntry('ünïcödé/файл-日本語.txt', 'привет'),
    dirEntry(`base/${'d'.repeat(60)}`),
    dirEntry(longDir),
    fileEntry(longFile, 'long path contents'),
  ]
}

const tempDir = (): string => makeTempDir('pgwasm-tar-')

describe('packTar / unpackTar', () => {
  it('round-trips nested dirs, empty, large, block-sized, unicode and long-path files', () => {
    const tree = sampleTree()
    expect(Buffer.byteLength(longFile)).toBeGreaterThan(100)
    const tar = packTar(tree)
    expect(tar.length % 512).toBe(0)
    expect(isGzip(tar)).toBe(false)
    const back = unpackTar(tar)
    expectSameTree(back, tree)
    // Data are views of the archive, not copies.
    const big = back.find((e) => e.path === 'base/1/big')!
    expect(big.data!.buffer).toBe(tar.buffer)
  })

  it('splits long names into prefix and name at a slash', () => {
    const tar = packTar([fileEntry(longFile, 'x')])
    const text = new TextDecoder()
    const name = text.decode(tar.subarray(0, 100)).replace(/\0+$/, '')
    const prefix = text.decode(tar.subarray(345, 500)).replace(/\0+$/, '')
    expect(`${prefix}/${name}`).toBe(longFile)
    expect(text.decode(tar.subarray(257, 265))).toBe('ustar\u000000')
  })

  it('rejects paths that cannot be split', () => {
    const name = 'x'.repeat(101)
    expect(() => packTar([fileEntry(name, 'x')])).toThrow(name)
    const deep = `${'p'.repeat(160)}/file`
    expect(() => packTar([fileEntry(deep, 'x')])).toThrow(deep)
  })

  it('raises TarError on a bad checksum, naming the offset', () => {
    const tar = packTar([fileEntry('a', 'hello'), fileEntry('b', 'world')])
    tar[1024 + 10] ^= 0x01
    expect(() => unpackTar(tar)).toThrow(TarError)
    try {
      unpackTar(tar)
    } catch (err) {
      expect((err as TarError).code).toBe('BAD_TAR')
      expect((err as TarError).message).toMatch(/offset 1024/)
    }
  })

  it('raises TarError on truncation', () => {
    const tar = packTar([fileEntry('a', new Uint8Array(2000))])
    expect(() => unpackTar(tar.subarray(0, 1000))).toThrow(TarError)
    expect(() => unpackTar(tar.subarray(0, 1000))).toThrow(/offset 0/)
    // Cut right after the data: the end-of-archive marker is missing.
    expect(() => unpackTar(tar.subarray(0, 512 + 2048))).toThrow(TarError)
    expect(() => unpackTar(tar.subarray(0, 700))).toThrow(TarError)
  })

  it('raises TarError on non-octal numeric fields', () => {
    const tar = packTar([dirEntry('d'), fileEntry('d/a', 'hello')])
    tar[512 + 124 + 3] = 0x39 // '9' in the size field
    fixChecksum(tar, 512)
    expect(() => unpackTar(tar)).toThrow(TarError)
    expect(() => unpackTar(tar)).toThrow(/size.*offset 512/)
  })

  it('synthesizes missing directories right before the first entry needing them', () => {
    const tar = packTar([fileEntry('top', 't'), fileEntry('a/b/c', 'c'), fileEntry('a/d', 'd'), dirEntry('a/b', 0o711)])
    const back = unpackTar(tar)
    expect(back.map((e) => [e.path, e.mode.toString(8)])).toEqual([
      ['top', '100644'],
      ['a', '40700'],
      ['a/b', '40711'],
      ['a/b/c', '100644'],
      ['a/d', '100644'],
    ])
  })

  it('detects gzip', () => {
    expect(isGzip(new Uint8Array([0x1f, 0x8b, 8]))).toBe(true)
    expect(isGzip(new Uint8Array([0x1f]))).toBe(false)
  })
})

/** Builds a directory on disk matching `tree` with exact modes. */
function writeTreeToDisk(root: string, tree: readonly TreeEntry[]): void {
  for (const e of tree) {
    const p = path.join(root, e.path)
    if ((e.mode & 0o170000) === DIR) fs.mkdirSync(p)
    else fs.writeFileSync(p, e.data!)
  }
  // Modes after creation so a restrictive dir mode cannot block its contents.
  for (const e of [...tree].reverse()) fs.chmodSync(path.join(root, e.path), e.mode & 0o7777)
}

function systemTar(extra: string[]): void {
  const tree = sampleTree().filter((e) => !e.path.startsWith('ünïcödé'))
  const work = tempDir()
  const src = path.join(work, 'src')
  fs.mkdirSync(src)
  writeTreeToDisk(src, tree)
  const archive = path.join(work, 'out.tar')
  execFileSync('tar', [...extra, '-cf', archive, '-C', src, '.'])
  const back = unpackTar(new Uint8Array(fs.readFileSync(archive)))
  // GNU tar walks directories in readdir order, so compare by path.
  const byPath = new Map(back.map((e) => [e.path, e]))
  expect([...byPath.keys()].sort()).toEqual(tree.map((e) => e.path).sort())
  for (const e of tree) {
    const got = byPath.get(e.path)!
    expect(got.mode.toString(8), e.path).toBe(e.mode.toString(8))
    expect(sameBytes(got.data, e.data), e.path).toBe(true)
  }
  const seen = new Set<string>()
  for (const e of back) {
    const slash = e.path.lastIndexOf('/')
    if (slash > 0) expect(seen.has(e.path.slice(0, slash)), e.path).toBe(true)
    seen.add(e.path)
  }
}

describe('interop with the system tar', () => {
  it('reads GNU-format archives (long names via L headers)', () => systemTar([]))
  it('reads ustar archives (prefix field)', () => systemTar(['--format=ustar']))
  it('reads pax archives (path records)', () => systemTar(['--format=pax']))

  it('keeps mtimes from the system tar', () => {
    const work = tempDir()
    fs.writeFileSync(path.join(work, 'f'), 'x')
    fs.utimesSync(path.join(work, 'f'), 1_600_000_000, 1_600_000_000)
    const archive = path.join(work, 'out.tar')
    execFileSync('tar', ['--format=ustar', '-cf', archive, '-C', work, 'f'])
    const [entry] = unpackTar(new Uint8Array(fs.readFileSync(archive)))
    expect(entry!.mtimeMs).toBe(1_600_000_000_000)
  })

  it('writes archives the system tar lists and extracts', () => {
    const tree = sampleTree()
    const work = tempDir()
    const archive = path.join(work, 'ours.tar')
    fs.writeFileSync(archive, packTar(tree))
    const listing = execFileSync('tar', ['-tvf', archive], { encoding: 'utf8' })
    expect(listing).toContain(longFile)
    expect(listing).toMatch(/^drwx------ .* base\/$/m)

    const out = path.join(work, 'out')
    fs.mkdirSync(out)
    execFileSync('tar', ['--no-same-owner', '-xf', archive, '-C', out])
    for (const e of tree) {
      const p = path.join(out, e.path)
      const st = fs.statSync(p)
      expect((st.mode & 0o170777).toString(8), e.path).toBe(e.mode.toString(8))
      // Directory mtimes are not checked: GNU tar sets them once it leaves a
      // directory, and later entries for it (long paths here) bump them again.
      if (!e.data) continue
      expect(Math.floor(st.mtimeMs / 1000), e.path).toBe(MTIME / 1000)
      expect(sameBytes(new Uint8Array(fs.readFileSync(p)), e.data), e.path).toBe(true)
    }
  })
})
