import { mkdir, rmdir, stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import { EngineError } from '../errors.js'

/**
 * Creates the directory `path` with `mode`, and its missing parent folders
 * (as `mkdir -p`, with the default mode). Not `mkdir(path, { recursive: true })`:
 * on Node 20, where `mkdir` of a folder fails with ENOENT although its parent
 * exists (anywhere under `/proc` or `/sys`), that retries the parent and the
 * folder forever at full CPU and never returns. A failure removes the folders
 * this call made, so nothing of a refused path is left behind.
 * @throws EngineError `BAD_DATA_DIR` naming the path and the system error (its `cause`).
 */
export async function makeDirs(path: string, mode: number): Promise<void> {
  const missing: string[] = []
  for (let dir = path; ; dir = dirname(dir)) {
    const found = await stat(dir).catch((err: NodeJS.ErrnoException) => err)
    if (found instanceof Error) {
      if (found.code !== 'ENOENT' || dirname(dir) === dir) throw cannotCreate(path, found)
      missing.push(dir)
      continue
    }
    if (!found.isDirectory()) {
      throw new EngineError(`cannot create the data directory ${path}: ${dir} exists and is not a directory`, { code: 'BAD_DATA_DIR' })
    }
    break
  }
  const made: string[] = []
  try {
    for (let i = missing.length - 1; i >= 0; i--) {
      const dir = missing[i]!
      try {
        await mkdir(dir, i === 0 ? mode : 0o777)
        made.push(dir)
      } catch (err) {
        // Made meanwhile by someone else: fine, as long as it is a folder.
        const isDir = (err as NodeJS.ErrnoException).code === 'EEXIST' && (await stat(dir).then((s) => s.isDirectory(), () => false))
        if (!isDir) throw cannotCreate(path, err as Error)
      }
    }
  } catch (err) {
    for (const dir of made.reverse()) await rmdir(dir).catch(() => {})
    throw err
  }
}

function cannotCreate(path: string, cause: Error): EngineError {
  return new EngineError(`cannot create the data directory ${path}: ${cause.message}`, { code: 'BAD_DATA_DIR', cause })
}
