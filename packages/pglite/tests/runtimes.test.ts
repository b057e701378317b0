import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { RUNTIMES } from './fixtures/runtimes.js'

/*
 * The core package under the other server-side runtimes PGlite's users run
 * it on. Bun and Deno come from the workspace's devDependencies (their
 * binaries ship inside npm packages), so every run has them; the test
 * names carry "[runs under Bun]" / "[runs under Deno]" and the run's
 * summary counts them (tool-groups-reporter.ts).
 */
const packageDir = fileURLToPath(new URL('..', import.meta.url))
const smoke = fileURLToPath(new URL('./fixtures/runtime-smoke.mjs', import.meta.url))

/** Runs `command script` in the package folder, killed after a minute. */
function runToEnd(command: readonly string[], script: string): Promise<{ status: number | string; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0]!, [...command.slice(1), script], { cwd: packageDir, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.once('error', reject)
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ status: code ?? signal ?? 'unknown', stdout, stderr })
    })
  })
}

describe('the core package under other runtimes', () => {
  /** What the script gives under Node, the reference. */
  let reference: Record<string, unknown>

  beforeAll(async () => {
    const run = await runToEnd([process.execPath], smoke)
    expect(run.status, `Node exited with ${run.status}\n${run.stdout}\n${run.stderr}`).toBe(0)
    reference = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>
    expect(reference).toEqual({
      values: { n: 42, t: 'ünï 😀', b: [1, 2, 255] },
      timeout: '57014',
      abort: '57014',
      rollback: 'Error: undo',
      afterRollback: true,
      trgm: expect.stringMatching(/^0\.\d{3}$/),
      notify: 'pong',
      dump: 6,
      directory: 42,
    })
  }, 120_000)

  for (const runtime of RUNTIMES) {
    it(`creates, queries, stops a statement, loads an extension, dumps and reopens a directory, as under Node [runs under ${runtime.name}]`, async () => {
      expect(existsSync(runtime.command[0]!), `${runtime.command[0]} (a devDependency of the workspace)`).toBe(true)
      const run = await runToEnd(runtime.command, smoke)
      expect(run.status, `${runtime.name} exited with ${run.status}\n${run.stdout}\n${run.stderr}`).toBe(0)
      expect(JSON.parse(run.stdout.trim().split('\n').at(-1)!)).toEqual(reference)
    })
  }
})
