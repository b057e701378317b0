import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { existsSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { tempDir as makeTempDir } from '@pgwasm/test-support/temp-dirs'
import { lockDataDir, LOCK_FILE } from '../src/fs/dir-lock.js'
import { DataDirLockedError, PGlite } from '../src/index.js'

const rootDir = fileURLToPath(new URL('../../../', import.meta.url))
const holderScript = fileURLToPath(new URL('./fixtures/dir-lock-holder.mts', import.meta.url))
const hasProc = existsSync('/proc/self/stat')

const children: ChildProcessWithoutNullStreams[] = []
afterAll(() => {
  for (const child of children) child.kill('SIGKILL')
})

const tempDir = (): string => makeTempDir('pgwasm-dir-lock-')

/** A child process and the lines it prints, in order. */
function spawnChild(command: string, args: string[]): { proc: ChildProcessWithoutNullStreams; nextLine: () => Promise<string> } {
  // `node --import tsx` runs the fixture in one process, so SIGKILL kills the lock holder itself.
  const proc = spawn(command, args, { cwd: rootDir, stdio: 'pipe' })
  children.push(proc)
  let stderr = ''
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const lines: string[] = []
  const waiters: ((line: string | undefined) => void)[] = []
  const reader = createInterface({ input: proc.stdout })
  reader.on('line', (line) => (waiters.length ? waiters.shift()!(line) : lines.push(line)))
  reader.on('close', () => waiters.splice(0).forEach((w) => w(undefined)))
  return {
    proc,
    nextLine: () =>
      lines.length
        ? Promise.resolve(lines.shift()!)
        : new Promise((resolve, reject) =>
            waiters.push((line) => (line === undefined ? reject(new Error(`child ended without output; stderr: ${stderr.slice(-800)}`)) : resolve(line))),
          ),
  }
}

function holderArgs(dir: string, mode: 'lock' | 'open'): string[] {
  return ['--import', 'tsx', holderScript, dir, mode]
}

function exited(proc: ChildProcessWithoutNullStreams): Promise<void> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve()
    else proc.once('exit', () => resolve())
  })
}

/** State (field 3) and start time (field 22) of /proc/<pid>/stat; the command name may hold spaces and parentheses. */
function procStat(pid: number): { state: string; startTicks: string } {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { state: rest[0]!, startTicks: rest[19]! }
}

function writeLock(dir: string, owner: Record<string, unknown>): void {
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ host: hostname(), token: `t${Math.random()}`, since: 'then', ...owner }))
}

async function lockError(dir: string): Promise<unknown> {
  return lockDataDir(dir).then(
    async (release) => {
      await release()
      return undefined
    },
    (err: unknown) => err,
  )
}

describe('the lock of a data directory', () => {
  it('takes over a lock whose holder was killed', async () => {
    const dir = tempDir()
    const { proc, nextLine } = spawnChild(process.execPath, holderArgs(dir, 'lock'))
    expect(await nextLine()).toBe(`holding ${proc.pid}`)
    proc.kill('SIGKILL')
    await exited(proc)
    const release = await lockDataDir(dir)
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({ pid: process.pid })
    await release()
  })

  it('refuses a lock held by a live child process, naming it', async () => {
    const dir = tempDir()
    const { proc, nextLine } = spawnChild(process.execPath, holderArgs(dir, 'lock'))
    expect(await nextLine()).toBe(`holding ${proc.pid}`)
    const err = await lockError(dir)
    expect(err).toBeInstanceOf(DataDirLockedError)
    expect((err as DataDirLockedError).holder).toBe(`pid ${proc.pid} on ${hostname()}`)
    proc.kill('SIGKILL')
    await exited(proc)
  })

  it('refuses a second lock of this process on the same directory until the first is released', async () => {
    const dir = tempDir()
    const release = await lockDataDir(dir)
    const err = await lockError(dir)
    expect(err).toBeInstanceOf(DataDirLockedError)
    expect((err as DataDirLockedError).holder).toBe(`pid ${process.pid} on ${hostname()}`)
    await release()
    await (await lockDataDir(dir))()
  })

  it('treats a second instance of this process that reaches the directory through a symlink as the same directory: the first is closed', async () => {
    const dir = join(tempDir(), 'db')
    const link = `${dir}-link`
    const db = await PGlite.create(dir)
    await db.exec('create table t (v int); insert into t values (1)')
    symlinkSync(dir, link)
    const second = await PGlite.create(link)
    try {
      expect(db.closed).toBe(true)
      expect((await second.query('select count(*)::int as n from t')).rows).toEqual([{ n: 1 }])
    } finally {
      await second.close()
    }
  })

  it('still reads a lock file without process identity: a live pid is refused', async () => {
    const dir = tempDir()
    writeLock(dir, { pid: process.ppid })
    expect(await lockError(dir)).toBeInstanceOf(DataDirLockedError)
  })

  it.skipIf(!hasProc)('takes over a lock naming pid 1 whose start time is not that of the live pid 1', async () => {
    // Issue "a stale lock whose pid was reused is never taken over": pid 1 stayed locked for good.
    const dir = tempDir()
    const live = procStat(1)
    writeLock(dir, {
      pid: 1,
      startTicks: String(Number(live.startTicks) + 1),
      bootId: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
      pidNs: readlinkSync('/proc/self/ns/pid'),
    })
    expect(await lockError(dir)).toBeUndefined()
  })

  it.skipIf(!hasProc)('takes over a lock naming a live pid recorded before a reboot (another boot id)', async () => {
    const dir = tempDir()
    writeLock(dir, { pid: 1, startTicks: procStat(1).startTicks, bootId: '00000000-0000-0000-0000-000000000000' })
    expect(await lockError(dir)).toBeUndefined()
  })

  it.skipIf(!hasProc)('takes over a lock whose pid now belongs to another process', async () => {
    const dir = tempDir()
    const parent = procStat(process.ppid)
    writeLock(dir, {
      pid: process.ppid,
      startTicks: String(Number(parent.startTicks) + 1),
      bootId: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
    })
    expect(await lockError(dir)).toBeUndefined()
  })

  it.skipIf(!hasProc)('takes over a lock held by a killed process that is not yet reaped (a zombie)', async () => {
    const dir = tempDir()
    const oldFormatDir = tempDir()
    // `exec sleep` replaces the shell: the holder's parent then never waits
    // for it, so once killed it stays a zombie until the sleep ends.
    const { proc, nextLine } = spawnChild('sh', [
      '-c',
      `"${process.execPath}" ${holderArgs(dir, 'lock').map((a) => `'${a}'`).join(' ')} & echo "child $!"; exec sleep 60`,
    ])
    const pid = Number((await nextLine()).slice('child '.length))
    expect(await nextLine()).toBe(`holding ${pid}`)
    process.kill(pid, 'SIGKILL')
    for (let i = 0; i < 200 && procStat(pid).state !== 'Z'; i++) await new Promise((r) => setTimeout(r, 25))
    expect(procStat(pid).state).toBe('Z')
    writeLock(oldFormatDir, { pid })
    const [err, oldFormatErr] = await Promise.all([lockError(dir), lockError(oldFormatDir)])
    proc.kill('SIGKILL')
    expect({ err, oldFormatErr }).toEqual({ err: undefined, oldFormatErr: undefined })
  })
})

/** Why a child cannot run as pid 1 of its own pid namespace here, or undefined if it can. */
function unshareProblem(): string | undefined {
  if (!hasProc) return 'no /proc'
  try {
    execFileSync('sh', ['-c', 'command -v unshare'], { stdio: 'pipe' })
  } catch {
    return '`unshare` is not installed'
  }
  try {
    const out = execFileSync('unshare', ['--pid', '--fork', '--mount-proc', 'sh', '-c', 'echo $$'], { stdio: 'pipe', timeout: 10_000 })
    if (out.toString().trim() !== '1') return `\`unshare --pid --fork --mount-proc\` did not run as pid 1 (got ${out.toString().trim()})`
  } catch (err) {
    return `\`unshare --pid --fork --mount-proc\` fails here (needs root): ${(err as Error).message.split('\n')[0]}`
  }
  return undefined
}

describe('a database opened by pid 1 of a pid namespace', () => {
  const problem = unshareProblem()
  it.skipIf(problem !== undefined)(
    `refuses the lock while that process lives, and takes it over once it was killed${problem ? ` (skipped: ${problem})` : ''}`,
    async () => {
      const dir = tempDir()
      const { proc, nextLine } = spawnChild('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, ...holderArgs(dir, 'lock')])
      expect(await nextLine()).toBe('holding 1')
      // Here pid 1 is another process: the holder is found by its start time and namespace.
      const err = await lockError(dir)
      expect(err).toBeInstanceOf(DataDirLockedError)
      expect((err as DataDirLockedError).holder).toBe(`pid 1 on ${hostname()}`)
      const inner = Number(readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim())
      process.kill(inner, 'SIGKILL')
      await exited(proc)
      expect(await lockError(dir)).toBeUndefined()
    },
  )

  it.skipIf(problem !== undefined)(
    `opens again, data intact, after that process was killed${problem ? ` (skipped: ${problem})` : ''}`,
    { timeout: 60_000 },
    async () => {
      const dir = tempDir()
      const { proc, nextLine } = spawnChild('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, ...holderArgs(dir, 'open')])
      expect(await nextLine()).toBe('holding 1')
      expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({ pid: 1, host: hostname() })
      // The database process is the only child of unshare (its pid 1 inside).
      const inner = Number(readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim())
      process.kill(inner, 'SIGKILL')
      await exited(proc)
      const db = await PGlite.create(dir)
      try {
        expect((await db.query('select a from t')).rows).toEqual([{ a: 42 }])
      } finally {
        await db.close()
      }
    },
  )
})
