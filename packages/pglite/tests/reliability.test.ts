import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { tempDir as makeTempDir } from '@pgwasm/test-support/temp-dirs'
import { bundleFixtures } from './fixtures/bundle.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DataDirLockedError, EngineError, IncompatibleDataDirError, PGlite } from '../src/index.js'

const here = dirname(fileURLToPath(import.meta.url))
// Children run bundled fixtures with plain node: no per-start TypeScript
// compile, and one process that SIGKILL really kills.
const bundleDir = join(here, '.fixtures-build')
beforeAll(async () => {
  await bundleFixtures(join(here, 'fixtures'), ['crash-writer', 'lock-contender'], bundleDir)
})
const ROUNDS = Number(process.env.TORTURE_ROUNDS ?? 30)
afterAll(() => {
  rmSync(bundleDir, { recursive: true, force: true })
})
const tempDir = (): string => makeTempDir('pgwasm-rel-')

/** A child process and its stdout as a queue of lines. */
class Child {
  readonly proc: ChildProcessWithoutNullStreams
  #lines: string[] = []
  #waiters: ((line: string) => void)[] = []
  /** Resolves once every line the child wrote has been read (its stdout ended). */
  readonly #ended: Promise<void>
  stderr = ''
  constructor(script: string, args: string[]) {
    this.proc = spawn(process.execPath, [join(bundleDir, script.replace(/\.mts$/, '.mjs')), ...args], { stdio: 'pipe' })
    this.proc.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()))
    const lines = createInterface({ input: this.proc.stdout })
    this.#ended = new Promise((resolve) => lines.once('close', resolve))
    lines.on('line', (line) => {
      const waiter = this.#waiters.shift()
      if (waiter) waiter(line)
      else this.#lines.push(line)
    })
  }
  /** Every line not read yet, once the child's stdout ended (after it exited). */
  async rest(): Promise<string[]> {
    await this.#ended
    return this.#lines.splice(0)
  }
  next(timeoutMs = 60_000): Promise<string> {
    const line = this.#lines.shift()
    if (line !== undefined) return Promise.resolve(line)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no output within ${timeoutMs} ms; stderr: ${this.stderr.slice(-500)}`)), timeoutMs)
      this.#waiters.push((l) => {
        clearTimeout(timer)
        resolve(l)
      })
    })
  }
  send(line: string): void {
    this.proc.stdin.write(`${line}\n`)
  }
  exited(): Promise<void> {
    return new Promise((resolve) => {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) resolve()
      else this.proc.once('exit', () => resolve())
    })
  }
}

async function crashRounds(dir: string, rounds: number): Promise<{ rounds: number; losses: string[]; last: number }> {
  let last = 0
  const losses: string[] = []
  for (let round = 0; round < rounds; round++) {
    const child = new Child('crash-writer.mts', [dir, String(last)])
    try {
      const verified = await child.next()
      if (!verified.endsWith(' ok')) losses.push(`round ${round}: ${verified}`)
      // Kill after a random number of commits, at a random moment between them.
      const target = 1 + Math.floor(Math.random() * 40)
      for (let seen = 0; seen < target; ) {
        const line = await child.next()
        if (line.startsWith('committed ')) {
          last = Number(line.slice('committed '.length))
          seen++
        }
      }
      await new Promise((r) => setTimeout(r, Math.random() * 5))
      child.proc.kill('SIGKILL')
      await child.exited()
      // Commits printed after our last read still count as reported: all of
      // them, however long the pipe takes to deliver them on a loaded machine.
      for (const l of await child.rest()) {
        if (l.startsWith('committed ')) last = Number(l.slice('committed '.length))
      }
    } finally {
      child.proc.kill('SIGKILL')
    }
  }
  return { rounds, losses, last }
}

describe('crash torture', () => {
  it(`loses no committed transaction over ${ROUNDS} SIGKILLs at random moments`, async () => {
    // Two directories tortured side by side: the 2-core machines do both at once.
    const half = Math.ceil(ROUNDS / 2)
    const tortured = [tempDir(), tempDir()] as const
    const results = await Promise.all([crashRounds(tortured[0], half), crashRounds(tortured[1], ROUNDS - half)])
    // Joined, so a failure prints every problem in full.
    expect(results.flatMap((r) => r.losses).join('\n')).toBe('')
    for (const [i, r] of results.entries()) {
      // A last check from this process, after the final kill.
      const db = await PGlite.create(tortured[i]!)
      const { rows } = await db.query<{ max: number | null; rows: number }>('select max(n) as max, count(*)::int as rows from crash')
      expect(rows[0]!.max).toBeGreaterThanOrEqual(r.last)
      expect(rows[0]!.rows).toBe(2 * rows[0]!.max!)
      await db.close()
    }
  }, 600_000)
})

describe('one owner per directory', () => {
  it('lets exactly one of two racing processes open a directory, 20 times, with the data intact', async () => {
    const dir = tempDir()
    const a = new Child('lock-contender.mts', [dir, 'a'])
    const b = new Child('lock-contender.mts', [dir, 'b'])
    try {
      for (let round = 0; round < 20; round++) {
        a.send(`go ${round}`)
        b.send(`go ${round}`)
        const results = [await a.next(), await b.next()]
        const winners = results.filter((r) => r.startsWith('won '))
        const losers = results.filter((r) => r.startsWith('lost '))
        expect(winners, `round ${round}: ${results.join(', ')}`).toHaveLength(1)
        expect(losers[0]).toBe(`lost ${round} DATA_DIR_LOCKED`)
        const winner = results[0]!.startsWith('won ') ? a : b
        winner.send('release')
        expect(await winner.next()).toBe('released')
      }
      a.send('exit')
      b.send('exit')
      a.proc.stdin.end()
      b.proc.stdin.end()
      await Promise.all([a.exited(), b.exited()])
      const db = await PGlite.create(dir)
      const { rows } = await db.query<{ n: number }>('select count(*)::int as n from wins')
      expect(rows[0]!.n).toBe(20)
      await db.close()
    } finally {
      a.proc.kill('SIGKILL')
      b.proc.kill('SIGKILL')
    }
  }, 600_000)

  it('takes over the lock of a process that died holding it', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    await db.exec('create table t (a int); insert into t values (1)')
    await db.close()
    // A lock file as a killed process leaves it: its pid no longer exists.
    writeFileSync(join(dir, '.pgwasm.lock'), JSON.stringify({ pid: 2 ** 22 + 12345, host: (await import('node:os')).hostname(), token: 'dead', since: 'then' }))
    writeFileSync(join(dir, 'postmaster.pid'), `${2 ** 22 + 12345}\n${dir}\n`)
    const again = await PGlite.create(dir)
    expect((await again.query('select count(*)::int as n from t')).rows).toEqual([{ n: 1 }])
    await again.close()
  })

  it('refuses a lock held by a live process, naming it', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    await db.close()
    writeFileSync(join(dir, '.pgwasm.lock'), JSON.stringify({ pid: process.ppid, host: (await import('node:os')).hostname(), token: 'alive', since: 'now' }))
    const err = await PGlite.create(dir).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(DataDirLockedError)
    expect((err as DataDirLockedError).holder).toContain(`pid ${process.ppid}`)
    rmSync(join(dir, '.pgwasm.lock'))
  })
})

describe('recovery instead of abort', () => {
  it('redoes a data directory whose creation was interrupted', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, '.pgwasm-initializing'), '')
    writeFileSync(join(dir, 'half-written-file'), 'junk')
    const db = await PGlite.create(dir)
    expect((await db.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
    await db.close()
    expect(readdirSync(dir)).not.toContain('half-written-file')
    expect(readdirSync(dir)).toContain('PG_VERSION')
  })

  it('rejects a directory of another PostgreSQL version with IncompatibleDataDirError naming both', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    await db.close()
    writeFileSync(join(dir, 'PG_VERSION'), '15\n')
    const err = await PGlite.create(dir).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(IncompatibleDataDirError)
    expect(err).toMatchObject({ dataDirVersion: '15', engineVersion: '18' })
  })

  it('turns an engine failure during open into an EngineError with the server log, and the process goes on', async () => {
    const dir = tempDir()
    const db = await PGlite.create(dir)
    await db.close()
    const control = join(dir, 'global', 'pg_control')
    const bytes = readFileSync(control)
    for (let i = 16; i < 64; i++) bytes[i] = bytes[i]! ^ 0x5a
    writeFileSync(control, bytes)
    const err = await PGlite.create(dir).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(EngineError)
    expect((err as EngineError).code).toBe('STARTUP_FAILED')
    expect((err as EngineError).log).toMatch(/control file/i)
    const other = await PGlite.create()
    expect((await other.query('select 1 as ok')).rows).toEqual([{ ok: 1 }])
    await other.close()
    // The failed open released the directory.
    expect(readdirSync(dir)).not.toContain('.pgwasm.lock')
  })
})
