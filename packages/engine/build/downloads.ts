// Files from Debian's archive, each checked against the SHA-256 it is pinned
// to before anything reads it, and kept in the cache so a rebuild fetches
// nothing.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'

export interface PinnedFile {
  url: string
  sha256: string
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** The pinned file's path in `dir`, downloaded first when it is not there yet. */
export async function download(file: PinnedFile, dir: string): Promise<string> {
  const path = join(dir, basename(new URL(file.url).pathname))
  if (existsSync(path) && sha256(readFileSync(path)) === file.sha256) return path
  mkdirSync(dir, { recursive: true })
  const response = await fetch(file.url)
  if (!response.ok) {
    throw new Error(
      `could not download ${file.url}: HTTP ${response.status}. Debian keeps only current versions in its archive; ` +
        'if this one was replaced, pin the new one in packages/engine/pins.json (README.md, "Moving to a new version")',
    )
  }
  const bytes = new Uint8Array(await response.arrayBuffer())
  const actual = sha256(bytes)
  if (actual !== file.sha256) {
    throw new Error(`${file.url} has SHA-256 ${actual}, but pins.json says ${file.sha256}: refusing to build from it`)
  }
  writeFileSync(`${path}.part`, bytes)
  renameSync(`${path}.part`, path)
  return path
}
