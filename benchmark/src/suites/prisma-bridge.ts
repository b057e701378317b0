import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { BENCH_DIR } from '../paths.js'
import type { BridgeReply, BridgeRequest, PrismaCase } from '../prisma-workload.js'

/** Long enough for the slowest round at default scale on a loaded 2-core machine; a hung child must not hang the suite. */
const ROUND_TIMEOUT_MS = 180_000
const SETUP_TIMEOUT_MS = 180_000

interface Waiter {
  resolve(reply: BridgeReply): void
  reject(err: Error): void
}

/**
 * The suite's handle on prisma-bridge-child.ts: one process, one request
 * at a time (the interleaving never overlaps paths), replies matched by
 * sequence number.
 */
export class BridgeChild {
  readonly #child: ChildProcess
  #waiter: Waiter | undefined
  #seq = 0
  #exited: string | undefined

  private constructor(child: ChildProcess) {
    this.#child = child
    child.on('message', (reply: BridgeReply) => {
      const w = this.#waiter
      this.#waiter = undefined
      if (reply.type === 'error') w?.reject(new Error(reply.message))
      else w?.resolve(reply)
    })
    child.on('exit', (code, signal) => {
      this.#exited = `bridge child exited (${signal ?? `code ${code}`})`
      this.#waiter?.reject(new Error(this.#exited))
      this.#waiter = undefined
    })
  }

  /**
   * Starts the child on `node` (through the tsx loader: it imports the
   * generated TypeScript client) and sets the bridge up.
   * @throws when the child cannot start or its setup fails.
   */
  static async start(node: string, target: 'bridge' | 'ours' = 'bridge'): Promise<{ child: BridgeChild; node: string; polyfilled: string[] }> {
    const proc = spawn(node, ['--import', 'tsx', join(BENCH_DIR, 'src', 'suites', 'prisma-bridge-child.ts')], {
      cwd: BENCH_DIR,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    const child = new BridgeChild(proc)
    try {
      const reply = await child.#request({ type: 'setup', target }, SETUP_TIMEOUT_MS)
      if (reply.type !== 'ready') throw new Error(`unexpected reply ${reply.type} to setup`)
      return { child, node: reply.node, polyfilled: reply.polyfilled }
    } catch (err) {
      child.kill()
      throw err
    }
  }

  /** Times `iterations` calls of `name` in the child after `warmup` untimed ones; the samples in ms. */
  async round(name: PrismaCase, iterations: number, warmup: number): Promise<number[]> {
    const seq = ++this.#seq
    const reply = await this.#request({ type: 'round', seq, case: name, iterations, warmup }, ROUND_TIMEOUT_MS)
    if (reply.type !== 'samples' || reply.seq !== seq) throw new Error(`unexpected reply ${reply.type} to round ${seq}`)
    return reply.samples
  }

  /** Asks the child to close the bridge and exit; kills it if it does not within 10 s. */
  async close(): Promise<void> {
    if (this.#exited) return
    const gone = new Promise<void>((done) => this.#child.once('exit', () => done()))
    const timer = setTimeout(() => this.kill(), 10_000)
    this.#child.send({ type: 'close' } satisfies BridgeRequest)
    await gone
    clearTimeout(timer)
  }

  kill(): void {
    if (!this.#exited) this.#child.kill('SIGKILL')
  }

  #request(req: BridgeRequest, timeoutMs: number): Promise<BridgeReply> {
    if (this.#exited) return Promise.reject(new Error(this.#exited))
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.kill()
        reject(new Error(`bridge child gave no reply to ${req.type} within ${timeoutMs / 1000} s`))
      }, timeoutMs)
      this.#waiter = {
        resolve: (r) => {
          clearTimeout(timer)
          resolve(r)
        },
        reject: (e) => {
          clearTimeout(timer)
          reject(e)
        },
      }
      this.#child.send(req)
    })
  }
}
