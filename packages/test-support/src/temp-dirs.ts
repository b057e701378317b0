/** Throwaway directories under the OS temp dir, gone after the test file that made them. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll } from 'vitest'

const tempDirs: string[] = []

// Registered on the root suite of each file that imports this module (vitest
// evaluates it once per file): every directory a file made goes with it,
// after the file's own afterAll hooks (they run in reverse order).
afterAll(() => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A new empty directory under the OS temp dir, removed after the file's tests. */
export function tempDir(prefix = 'pgwasm-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  tempDirs.push(dir)
  return dir
}
