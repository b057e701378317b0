/**
 * Vitest global setup of the pglite-prisma tests: builds the workspace
 * packages the tests import through their package entry when they are not
 * built yet, and generates the Prisma Client of the test schema offline.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { offlineGenerateEnv } from '../src/generate.js'

const here = dirname(fileURLToPath(import.meta.url))
const packageDir = join(here, '..')
const root = join(packageDir, '..', '..')

function buildIfMissing(name: string): void {
  const dir = join(root, 'packages', name)
  if (existsSync(join(dir, 'dist', 'index.js'))) return
  const build = spawnSync(process.execPath, [join(root, 'scripts', 'build-package.mjs'), dir], { stdio: 'inherit' })
  if (build.status !== 0) throw new Error(`building packages/${name} failed`)
}

/**
 * The test schema's client, generated offline (see offlineGenerateEnv for
 * why the environment matters); skipped when the schema and the Prisma
 * version are those it was generated from.
 */
export function generateClient(): void {
  const require = createRequire(import.meta.url)
  const prismaDir = dirname(require.resolve('prisma/package.json'))
  const cli = join(prismaDir, 'build', 'index.js')
  const schemaFile = join(here, 'fixtures', 'schema.prisma')
  const stampFile = join(here, 'generated', '.stamp')
  const stamp = createHash('sha256')
    .update(readFileSync(schemaFile))
    .update(readFileSync(join(prismaDir, 'package.json')))
    .digest('hex')
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return
  rmSync(join(here, 'generated'), { recursive: true, force: true })
  mkdirSync(join(here, 'generated'), { recursive: true })
  const run = spawnSync(process.execPath, [cli, 'generate', '--schema', schemaFile], {
    cwd: packageDir,
    encoding: 'utf8',
    env: { ...process.env, ...offlineGenerateEnv() },
  })
  if (run.status !== 0) throw new Error(`prisma generate failed:\n${run.stdout}\n${run.stderr}`)
  writeFileSync(stampFile, stamp)
}

export default function setup(): void {
  buildIfMissing('pglite')
  buildIfMissing('pglite-socket')
  generateClient()
}
