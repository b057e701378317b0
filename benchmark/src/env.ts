import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { BENCH_DIR } from './paths.js'

function packageVersion(dir: string): string | null {
  try {
    return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: string }).version ?? null
  } catch {
    return null
  }
}

/** Versions of everything a row depends on, read from the installed packages. */
export function versions(): Record<string, string | null> {
  const nm = join(BENCH_DIR, 'node_modules')
  const out: Record<string, string | null> = {}
  for (const name of ['@pgwasm/pglite', '@electric-sql/pglite', '@electric-sql/pglite-socket', 'better-sqlite3', 'pg', 'tinybench']) {
    out[name] = packageVersion(join(nm, name))
  }
  // The pglite that pglite-socket really runs on (pnpm override, see README).
  try {
    const socketDir = realpathSync(join(nm, '@electric-sql/pglite-socket'))
    out['@electric-sql/pglite (under pglite-socket)'] = packageVersion(join(dirname(socketDir), 'pglite'))
  } catch {
    out['@electric-sql/pglite (under pglite-socket)'] = null
  }
  // The engine build our package runs is the one from its pinned @electric-sql/pglite.
  try {
    const ours = realpathSync(join(nm, '@pgwasm/pglite'))
    out['@electric-sql/pglite (engine of @pgwasm/pglite)'] = packageVersion(join(ours, 'node_modules/@electric-sql/pglite'))
  } catch {
    out['@electric-sql/pglite (engine of @pgwasm/pglite)'] = null
  }
  return out
}

/** The checked-out commit, read from .git without running git. */
export function gitSha(): string | null {
  let dir = BENCH_DIR
  for (;;) {
    const git = join(dir, '.git')
    if (existsSync(git)) {
      if (statSync(git).isDirectory()) return resolveHead(git)
      // A worktree or submodule: .git is a file naming the real git directory.
      const pointer = readFileSync(git, 'utf8')
      return pointer.startsWith('gitdir:') ? resolveHead(resolve(dir, pointer.slice(7).trim())) : null
    }
    const up = dirname(dir)
    if (up === dir) return null
    dir = up
  }
}

function resolveHead(gitDir: string): string | null {
  try {
    const head = readFileSync(join(gitDir, 'HEAD'), 'utf8').trim()
    if (!head.startsWith('ref:')) return head
    const ref = head.slice(4).trim()
    const loose = join(gitDir, ref)
    if (existsSync(loose)) return readFileSync(loose, 'utf8').trim()
    const packed = readFileSync(join(gitDir, 'packed-refs'), 'utf8')
    const line = packed.split('\n').find((l) => l.endsWith(` ${ref}`))
    return line ? line.split(' ')[0]! : null
  } catch {
    return null
  }
}

export function machine(): { cpu: string; cores: number; memoryGiB: number; platform: string; node: string } {
  const list = cpus()
  return {
    cpu: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    platform: `${process.platform} ${process.arch}`,
    node: process.version,
  }
}
