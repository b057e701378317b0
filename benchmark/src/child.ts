import { build } from 'esbuild'
import { spawn } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { BENCH_DIR, CACHE_DIR } from './paths.js'

/**
 * Bundles a child entry to plain JavaScript (dependencies stay external),
 * so measured child processes run without the TypeScript loader's module
 * hooks, which would inflate import and start-up times.
 */
export async function bundleChild(entry: string): Promise<string> {
  mkdirSync(CACHE_DIR, { recursive: true })
  const outfile = join(CACHE_DIR, entry.replace(/[/\\]/g, '_').replace(/\.ts$/, '.mjs'))
  await build({
    entryPoints: [join(BENCH_DIR, 'src', entry)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'warning',
  })
  return outfile
}

export interface ChildOutcome {
  ok: boolean
  stdout: string
  stderr: string
  code: number | null
}

/** Runs `node file ...args` from the benchmark directory, so it resolves the benchmark's dependencies. */
export function runNode(file: string, args: string[], timeoutMs: number, env?: Record<string, string>): Promise<ChildOutcome> {
  return runNodeIn(BENCH_DIR, file, args, timeoutMs, env)
}

/** Runs `node file ...args` in `cwd`. */
export function runNodeIn(cwd: string, file: string, args: string[], timeoutMs: number, env?: Record<string, string>): Promise<ChildOutcome> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [file, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], ...(env ? { env: { ...process.env, ...env } } : {}) })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      if (signal) stderr += `\nkilled by ${signal}${signal === 'SIGKILL' ? ` (timeout ${timeoutMs} ms?)` : ''}`
      done({ ok: code === 0, stdout, stderr, code })
    })
  })
}
