/** Programs the tests run to their end: libpq's tools, the CLIs, anything on PATH. */
import { spawn, spawnSync } from 'node:child_process'

/** Whether a program is on PATH (psql, pgbench). */
export function hasProgram(name: string): boolean {
  return spawnSync('which', [name], { stdio: 'ignore' }).status === 0
}

export interface ProcessResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/**
 * Runs a program to its end, killing it after `timeoutMs` (the promise then
 * rejects with what it printed so far).
 */
export async function run(
  command: string,
  args: string[],
  options: { timeoutMs: number; env?: NodeJS.ProcessEnv; cwd?: string },
): Promise<ProcessResult> {
  const child = spawn(command, args, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  const exited = new Promise<ProcessResult>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    return await Promise.race([
      exited,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `${command} ${args.join(' ')} did not finish within ${options.timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`,
              ),
            ),
          options.timeoutMs,
        )
      }),
    ])
  } finally {
    clearTimeout(timer)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
}

/** Environment for libpq tools: no stray PG* settings from the machine, a bounded connect. */
export function libpqEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v
  env.PGCONNECT_TIMEOUT = '20'
  return env
}
