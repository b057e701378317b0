import { randomBytes } from 'node:crypto'
import { open, readFile, rename, stat, unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { DataDirLockedError } from '../errors.js'
import { pidExists } from '../engine/start/process-alive.js'
import { holderState, ownIdentity, type ProcessIdentity } from './process-identity.js'

/** The lock file of a data directory: whoever created it owns the directory. */
export const LOCK_FILE = '.pgwasm.lock'

/**
 * The lock file's JSON. The identity fields (Linux only) are absent from
 * locks written before they were added and on other platforms.
 */
interface LockOwner extends Partial<ProcessIdentity> {
  pid: number
  host: string
  token: string
  since: string
}

/**
 * Takes the directory's lock file (created with O_EXCL, so exactly one of
 * several racing openers wins). A lock whose owner is a dead process on this
 * host is taken over: one that exited, was killed and not yet reaped, or
 * whose pid now names another process (told apart by the start time recorded
 * with the pid, see process-identity.ts). Any other lock, including one of
 * this process, makes this throw DataDirLockedError naming the holder.
 * @returns a function that releases the lock (only if it is still ours).
 */
export async function lockDataDir(dir: string): Promise<() => Promise<void>> {
  const path = join(dir, LOCK_FILE)
  const me: LockOwner = {
    pid: process.pid,
    host: hostname(),
    token: randomBytes(8).toString('hex'),
    since: new Date().toISOString(),
    ...(await ownIdentity()),
  }
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const file = await open(path, 'wx', 0o600)
      try {
        await file.writeFile(JSON.stringify(me))
        await file.sync()
      } finally {
        await file.close()
      }
      return () => releaseIfOurs(path, me.token)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    const holder = await readOwner(path)
    if (!holder) {
      // Removed meanwhile, or being written by a racing opener; a file left
      // empty by a crash between create and write is stale after a while.
      const st = await stat(path).catch(() => undefined)
      if (st && Date.now() - st.mtimeMs > 10_000) await unlink(path).catch(() => {})
      else await new Promise((r) => setTimeout(r, 20))
      continue
    }
    if (holder.host !== me.host || (await isAlive(holder))) {
      throw new DataDirLockedError(
        `the data directory ${dir} is in use by pid ${holder.pid} on ${holder.host} (since ${holder.since}); close that instance first`,
        { path: dir, holder: `pid ${holder.pid} on ${holder.host}` },
      )
    }
    // Its owner died. Move the stale file aside atomically; if another opener
    // replaced it in between, what we moved is not the stale lock: put it back.
    const aside = `${path}.stale-${me.token}`
    try {
      await rename(path, aside)
    } catch {
      continue
    }
    const moved = await readOwner(aside)
    if (moved?.token !== holder.token) {
      await rename(aside, path).catch(() => {})
      continue
    }
    await unlink(aside).catch(() => {})
  }
  throw new DataDirLockedError(`could not take the lock of ${dir}: it keeps changing hands`, { path: dir, holder: 'unknown' })
}

async function readOwner(path: string): Promise<LockOwner | undefined> {
  try {
    const owner = JSON.parse(await readFile(path, 'utf8')) as Partial<Record<keyof LockOwner, unknown>>
    if (typeof owner.pid === 'number' && typeof owner.host === 'string' && typeof owner.token === 'string') {
      return {
        pid: owner.pid,
        host: owner.host,
        token: owner.token,
        since: typeof owner.since === 'string' ? owner.since : '?',
        startTicks: typeof owner.startTicks === 'string' ? owner.startTicks : undefined,
        bootId: typeof owner.bootId === 'string' ? owner.bootId : undefined,
        pidNs: typeof owner.pidNs === 'string' ? owner.pidNs : undefined,
      }
    }
  } catch {
    // Missing or not yet fully written.
  }
  return undefined
}

async function isAlive(holder: LockOwner): Promise<boolean> {
  const state = await holderState(holder.pid, holder)
  if (state !== 'unknown') return state === 'alive'
  // No /proc, or a lock without identity: the pid alone has to do. Our own
  // pid is alive by definition (another instance here, or a worker thread).
  return holder.pid === process.pid || pidExists(holder.pid)
}

async function releaseIfOurs(path: string, token: string): Promise<void> {
  const owner = await readOwner(path)
  if (owner?.token === token) await unlink(path).catch(() => {})
}
