import { readdir, readFile, readlink } from 'node:fs/promises'

/**
 * What tells one run of a process from another that got the same pid later
 * (Linux `/proc`): a pid alone is reused, and a container's database process
 * is pid 1 on every start.
 */
export interface ProcessIdentity {
  /** Start time in clock ticks after boot: field 22 of `/proc/<pid>/stat`. */
  readonly startTicks: string
  /** `/proc/sys/kernel/random/boot_id`: start times count from this boot. */
  readonly bootId: string
  /** The pid namespace (`/proc/self/ns/pid`) the pid is numbered in, when readable. */
  readonly pidNs?: string
}

/** Whether a recorded lock holder still runs; `unknown` where `/proc` cannot tell. */
export type HolderState = 'alive' | 'dead' | 'unknown'

interface ProcView {
  readonly self: ProcessIdentity
  /** `/proc` numbers processes as this process does (it is our pid namespace's). */
  readonly pidsAreOurs: boolean
}

let view: Promise<ProcView | undefined> | undefined

/** This process's identity, or undefined without a usable `/proc` (macOS, Windows). */
export async function ownIdentity(): Promise<ProcessIdentity | undefined> {
  return (await procView())?.self
}

function procView(): Promise<ProcView | undefined> {
  view ??= (async () => {
    try {
      const [stat, bootId, pidNs] = await Promise.all([
        readStat('self'),
        readFile('/proc/sys/kernel/random/boot_id', 'utf8'),
        readlink('/proc/self/ns/pid').catch(() => undefined),
      ])
      if (!stat) return undefined
      return { self: { startTicks: stat.startTicks, bootId: bootId.trim(), pidNs }, pidsAreOurs: stat.pid === process.pid }
    } catch {
      return undefined
    }
  })()
  return view
}

/**
 * Whether the process that recorded `identity` under `pid` (on this host)
 * still runs. A zombie (killed, not yet reaped) counts as dead: it holds no
 * files and runs no code, and a restart right after `kill -9` must work.
 */
export async function holderState(pid: number, identity: Partial<ProcessIdentity>): Promise<HolderState> {
  const proc = await procView()
  if (!proc) return 'unknown'
  if (identity.startTicks === undefined || identity.bootId === undefined) {
    // A lock of an older version: only a zombie can be told apart here.
    if (!proc.pidsAreOurs) return 'unknown'
    const stat = await readStat(String(pid))
    return stat && isGone(stat.state) ? 'dead' : 'unknown'
  }
  // Another boot: nothing that ran before it runs now.
  if (identity.bootId !== proc.self.bootId) return 'dead'
  const sameNs = identity.pidNs === undefined || proc.self.pidNs === undefined || identity.pidNs === proc.self.pidNs
  if (sameNs && proc.pidsAreOurs) {
    const stat = await readStat(String(pid))
    return stat && !isGone(stat.state) && stat.startTicks === identity.startTicks ? 'alive' : 'dead'
  }
  return (await findByStart(identity.startTicks, identity.pidNs)) ? 'alive' : 'dead'
}

/**
 * Looks for the holder by start time among every process this `/proc`
 * shows: its pid was numbered in another pid namespace (a container, or
 * `unshare --pid`), so the same number here names some other process. A
 * holder in a namespace this one cannot see (a sibling container) is not
 * found; the lock's host name tells such holders apart in the usual setups.
 */
async function findByStart(startTicks: string, pidNs: string | undefined): Promise<boolean> {
  const entries = await readdir('/proc').catch(() => [] as string[])
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const stat = await readStat(entry)
    if (!stat || stat.startTicks !== startTicks || isGone(stat.state)) continue
    // Start times have a granularity of a tick: another process may share it.
    // One whose namespace cannot be read is taken to be the holder.
    const ns = await readlink(`/proc/${entry}/ns/pid`).catch(() => undefined)
    if (pidNs === undefined || ns === undefined || ns === pidNs) return true
  }
  return false
}

/** `Z`: zombie; `X`: dead (seen for an instant while being reaped). */
function isGone(state: string): boolean {
  return state === 'Z' || state === 'X'
}

async function readStat(pid: string): Promise<{ pid: number; state: string; startTicks: string } | undefined> {
  let text: string
  try {
    text = await readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // Field 2 is the command name in parentheses, which may itself hold spaces
  // and parentheses: the fields after it start after the last `)`.
  const close = text.lastIndexOf(')')
  const fields = text.slice(close + 2).split(' ')
  const startTicks = fields[19]
  if (close < 0 || fields[0] === undefined || startTicks === undefined) return undefined
  return { pid: Number.parseInt(text, 10), state: fields[0], startTicks }
}
