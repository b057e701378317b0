// Running the build's commands: each step prints its name and how long it
// took, each command's output goes to the step's log file, and a failure
// shows the end of that log (a compiler error is usually in its last lines).
import { execFile, spawn } from 'node:child_process'
import { createWriteStream, readFileSync } from 'node:fs'

/** A command that ended badly, with the end of what it printed. */
export class BuildStepError extends Error {
  constructor(message: string, readonly logFile: string) {
    super(message)
    this.name = 'BuildStepError'
  }
}

export interface CommandOptions {
  cwd: string
  env?: NodeJS.ProcessEnv
  /** Where the command's stdout and stderr go (appended). */
  log: string
}

/** Runs a command to its end; rejects with the log's last lines when it fails. */
export async function run(command: string, args: readonly string[], options: CommandOptions): Promise<void> {
  const out = createWriteStream(options.log, { flags: 'a' })
  out.write(`\n$ (cd ${options.cwd} && ${[command, ...args].join(' ')})\n`)
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.pipe(out, { end: false })
    child.stderr.pipe(out, { end: false })
    child.on('error', reject)
    child.on('close', (status, signal) => resolve(signal ? 128 : (status ?? 1)))
  })
  await new Promise<void>((resolve) => out.end(resolve))
  if (code !== 0) {
    const tail = readFileSync(options.log, 'utf8').trimEnd().split('\n').slice(-40).join('\n')
    throw new BuildStepError(`${command} ${args.slice(0, 3).join(' ')} failed (exit ${code}); the end of ${options.log}:\n${tail}`, options.log)
  }
}

/** Runs a command that only prints (make -n) and returns what it printed. */
export function capture(command: string, args: readonly string[], options: Omit<CommandOptions, 'log'>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd: options.cwd, env: options.env ?? process.env, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new BuildStepError(`${command} ${args.slice(0, 3).join(' ')} failed: ${stderr.slice(-2000)}`, ''))
      else resolve(stdout)
    })
  })
}

/** Runs one named step of the build and reports how long it took. */
export async function step<T>(name: string, work: () => Promise<T>): Promise<T> {
  const started = Date.now()
  process.stdout.write(`engine: ${name} ...\n`)
  const result = await work()
  process.stdout.write(`engine: ${name} done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
  return result
}
