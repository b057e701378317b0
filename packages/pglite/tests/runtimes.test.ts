import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { lastJsonLine, RUNTIMES, startUnder } from '@pgwasm/test-support/runtimes'

/*
 * The core package under the other server-side runtimes PGlite's users run
 * it on. Bun and Deno come from the workspace's devDependencies (their
 * binaries ship inside npm packages), so every run has them; the test
 * names carry "[runs under Bun]" / "[runs under Deno]" and the run's
 * summary counts them (tool-groups-reporter.ts).
 */
const packageDir = fileURLToPath(new URL('..', import.meta.url))
const smoke = fileURLToPath(new URL('./fixtures/runtime-smoke.mjs', import.meta.url))

/** Runs the smoke script under `command` to its end (killed after a minute). */
async function runSmoke(command: readonly string[]): Promise<{ status: number | string; result: unknown; output: string }> {
  const run = startUnder(command, [smoke], packageDir)
  const timer = setTimeout(() => run.child.kill('SIGKILL'), 60_000)
  const status = await run.exited
  clearTimeout(timer)
  return { status, result: status === 0 ? lastJsonLine(run.stdout()) : undefined, output: run.output() }
}

describe('the core package under other runtimes', () => {
  /** What the script gives under Node, the reference. */
  let reference: Record<string, unknown>

  beforeAll(async () => {
    const run = await runSmoke([process.execPath])
    expect(run.status, `Node exited with ${run.status}\n${run.output}`).toBe(0)
    reference = run.result as Record<string, unknown>
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
      const run = await runSmoke(runtime.command)
      expect(run.status, `${runtime.name} exited with ${run.status}\n${run.output}`).toBe(0)
      expect(run.result).toEqual(reference)
    })
  }
})
