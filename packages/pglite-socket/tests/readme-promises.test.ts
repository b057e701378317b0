import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { within } from '@pgwasm/test-support/async'
import { frame } from '@pgwasm/test-support/frontend'
import { RawClient } from '@pgwasm/test-support/raw-client'
import { PGliteServer } from '../src/index.js'
import { endQuietly, pgClient, useDatabase } from './helpers.js'

// What the README says the server does, each checked as a client or an operator sees it.
describe('README promises of pgwasm-server', () => {
  const database = useDatabase()

  it('emits listening with its address, connection and disconnect with the client process id', async () => {
    const server = new PGliteServer({ db: database.db, host: '127.0.0.1', port: 0 })
    const events: string[] = []
    const listening = new Promise<unknown>((resolve) => server.once('listening', resolve))
    server.on('connection', (pid: number) => events.push(`connection ${pid}`))
    const disconnected = new Promise<number>((resolve) => server.once('disconnect', resolve))
    const address = await server.start()
    expect(await listening).toEqual(address)
    const client = await pgClient((address as { port: number }).port)
    const pid = client.processID
    await endQuietly(client)
    expect(await within(disconnected, 10_000, 'the disconnect event')).toBe(pid)
    expect(events).toEqual([`connection ${pid}`])
    await server.stop()
  })

  it('maxMessageBytes: a longer message ends that connection with FATAL 08P01, a shorter one runs', async () => {
    const server = new PGliteServer({ db: database.db, host: '127.0.0.1', port: 0, maxMessageBytes: 4096 })
    const { port } = (await server.start()) as { port: number }
    try {
      const raw = new RawClient(port)
      await raw.handshake()
      raw.write(frame('Q', Buffer.from(`select '${'x'.repeat(5000)}'\0`)))
      const reply = await within(raw.until('E'), 10_000, 'the FATAL for an oversized message')
      const error = reply.at(-1)!.body.toString()
      expect(error).toContain('FATAL')
      expect(error).toContain('08P01')
      await within(raw.closed, 10_000, 'the server to close the connection')
      const fine = await pgClient(port)
      expect((await fine.query(`select length('${'y'.repeat(1000)}') as n`)).rows).toEqual([{ n: 1000 }])
      await endQuietly(fine)
    } finally {
      await server.stop()
    }
  })

  it('the CLI stops on SIGINT with exit code 0', { timeout: 120_000 }, async () => {
    const here = dirname(fileURLToPath(import.meta.url))
    const tsx = createRequire(import.meta.url).resolve('tsx')
    const child = spawn(process.execPath, ['--import', tsx, join(here, '..', 'src', 'cli.ts'), '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    try {
      await within(
        (async () => {
          while (!/serving/.test(out)) await new Promise((r) => setTimeout(r, 50))
        })(),
        90_000,
        'the CLI to serve',
      )
      child.kill('SIGINT')
      expect(await within(exited, 30_000, 'the CLI to exit after SIGINT')).toBe(0)
      expect(out).toContain('SIGINT: shutting down')
      expect(out).toContain('pgwasm-server: stopped')
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL')
    }
  })
})
