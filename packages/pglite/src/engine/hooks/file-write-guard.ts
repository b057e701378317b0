import type { PostgresModule } from '../emscripten.js'
import type { SessionGuards } from './session-guards.js'

/**
 * `S_IWGRP | S_IWOTH`: the umask Postgres sets just before the one open of a
 * file that SQL named for writing (`COPY … TO 'file'` in copyto.c,
 * `lo_export` in be-fsstubs.c), and nowhere else; it restores the previous
 * umask right after (which here may be the same value: Emscripten starts
 * with 022). Between those two calls, an open for writing is SQL's.
 */
const SQL_WRITE_UMASK = 0o022
const O_ACCMODE = 0o3
const O_CREAT = 0o100
const O_TRUNC = 0o1000
const AT_FDCWD = -100
/** Emscripten's (WASI) errno number. */
const EACCES = 2

/** Where SQL may write files: the engine's memory (`/tmp`), and the devices that go nowhere or to the caller. */
function mayWrite(path: string): boolean {
  return path === '/dev/blob' || path === '/dev/null' || path.startsWith('/tmp/')
}

/** `path` made absolute against the engine's working directory, `.` and `..` resolved. */
function normalize(mod: PostgresModule, dirfd: number, path: string): string {
  const base = path.startsWith('/') ? '' : dirfd === AT_FDCWD ? mod.FS.cwd() : mod.FS.getStream(dirfd)?.path ?? '/'
  const parts: string[] = []
  for (const part of `${base}/${path}`.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..') parts.pop()
    else parts.push(part)
  }
  return `/${parts.join('/')}`
}

/** The path with symlinks resolved as far as it exists, so a link cannot lead a write elsewhere. */
function realPath(mod: PostgresModule, path: string): string {
  try {
    return mod.FS.lookupPath(path, { follow: true }).path
  } catch {
    const cut = path.lastIndexOf('/')
    return cut <= 0 ? path : `${realPath(mod, path.slice(0, cut) || '/')}/${path.slice(cut + 1)}`.replace(/^\/\//, '/')
  }
}

/**
 * Wraps the glue's `umask` and `openat` imports so that a file SQL asks the
 * engine to write (COPY TO a file, lo_export) can only be in `/tmp` (engine
 * memory) or `/dev/blob`: anywhere else, the data directory above all, it
 * could replace `PG_VERSION`, `pg_control` or a table's file, or create
 * `standby.signal`, and the database would no longer open.
 */
export function guardSqlFileWrites(
  env: Record<string, unknown>,
  getModule: () => PostgresModule | undefined,
  getGuards: () => SessionGuards | undefined,
): void {
  const umask = env.__syscall_umask as (mask: number) => number
  const openat = env.__syscall_openat as (dirfd: number, path: number, flags: number, varargs: number) => number
  let sqlWrite = false
  env.__syscall_umask = (mask: number): number => {
    // The restoring call ends the window, whatever it restores.
    sqlWrite = !sqlWrite && mask === SQL_WRITE_UMASK
    return umask(mask)
  }
  env.__syscall_openat = (dirfd: number, pathPtr: number, flags: number, varargs: number): number => {
    if (sqlWrite && ((flags & O_ACCMODE) !== 0 || (flags & (O_CREAT | O_TRUNC)) !== 0)) {
      const mod = getModule()
      const guards = getGuards()
      if (mod && guards) {
        const named = mod.UTF8ToString(pathPtr)
        const path = realPath(mod, normalize(mod, dirfd, named))
        if (!mayWrite(path)) {
          // An ERROR inside a critical section would be a PANIC: fail the open instead.
          if (guards.inCriticalSection) return -EACCES
          guards.raise({
            code: '42501',
            message: `could not open file "${named}" for writing: pgwasm lets SQL write files only under /tmp`,
            hint: `The data directory holds the database itself. COPY … TO STDOUT, or TO '/dev/blob', returns the data to the caller; a file under /tmp lives in the engine's memory.`,
          })
        }
      }
    }
    return openat(dirfd, pathPtr, flags, varargs)
  }
}
