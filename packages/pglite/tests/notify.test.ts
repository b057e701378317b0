import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deferred } from '@pgwasm/test-support/async'
import { PGlite } from '../src/index.js'

/** Bound for tests that wait for a notification. */
const WAIT_MS = 10_000

let db: PGlite

beforeAll(async () => {
  db = await PGlite.create()
})

afterAll(async () => {
  await db?.close()
})

/** Listens on `channel`, recording payloads; `next` resolves with the next one. */
async function record(channel: string): Promise<{
  payloads: string[]
  next: () => Promise<string>
  unsubscribe: () => Promise<void>
}> {
  const payloads: string[] = []
  let waiting: ((p: string) => void) | undefined
  const unsubscribe = await db.listen(channel, (payload) => {
    payloads.push(payload)
    const w = waiting
    waiting = undefined
    w?.(payload)
  })
  return {
    payloads,
    next: () => new Promise<string>((resolve) => (waiting = resolve)),
    unsubscribe: () => unsubscribe(),
  }
}

describe('listen()', () => {
  it('receives a NOTIFY sent through query()', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_query')
    const next = ch.next()
    await db.query("NOTIFY n_query, 'from query'")
    expect(await next).toBe('from query')
  })

  it('receives pg_notify() called with parameters through query()', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_params')
    const next = ch.next()
    await db.query('select pg_notify($1, $2)', ['n_params', 'héllo 🌍'])
    expect(await next).toBe('héllo 🌍')
  })

  it('receives a NOTIFY sent through exec()', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_exec')
    const next = ch.next()
    await db.exec("NOTIFY n_exec, 'from exec'")
    expect(await next).toBe('from exec')
  })

  it('receives an empty payload as an empty string', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_empty')
    const next = ch.next()
    await db.exec('NOTIFY n_empty')
    expect(await next).toBe('')
  })

  it('receives several notifications of one exec in order', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_order')
    const last = deferred()
    const stop = await db.listen('n_order_end', () => last.resolve())
    await db.exec("NOTIFY n_order, '1'; NOTIFY n_order, '2'; NOTIFY n_order, '3'; NOTIFY n_order_end")
    await last.promise
    await stop()
    expect(ch.payloads).toEqual(['1', '2', '3'])
  })

  it('delivers a NOTIFY sent inside a transaction only after the commit', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_tx')
    const next = ch.next()
    const seenInside = await db.transaction(async (tx) => {
      await tx.query("NOTIFY n_tx, 'committed'")
      await tx.query('select 1')
      return [...ch.payloads]
    })
    expect(seenInside).toEqual([])
    expect(await next).toBe('committed')
  })

  it('does not deliver a NOTIFY of a transaction that rolled back', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_rollback')
    await db
      .transaction(async (tx) => {
        await tx.query("NOTIFY n_rollback, 'rolled back'")
        throw new Error('abandon')
      })
      .catch(() => {})
    await db.transaction(async (tx) => {
      await tx.exec("NOTIFY n_rollback, 'discarded too'")
      await tx.rollback()
    })
    const next = ch.next()
    await db.exec("NOTIFY n_rollback, 'after'")
    await next
    expect(ch.payloads).toEqual(['after'])
  })

  it('lets a listener subscribe inside a transaction with tx.listen', { timeout: WAIT_MS }, async () => {
    const got = deferred<string>()
    await db.transaction(async (tx) => {
      await tx.listen('n_tx_listen', (p) => got.resolve(p))
    })
    await db.exec("NOTIFY n_tx_listen, 'ok'")
    expect(await got.promise).toBe('ok')
  })

  it("folds an unquoted channel name to lower case: listen('FooFold') receives NOTIFY foofold", { timeout: WAIT_MS }, async () => {
    const ch = await record('FooFold')
    const next = ch.next()
    await db.exec("NOTIFY foofold, 'folded'")
    expect(await next).toBe('folded')
  })

  it('folds unquoted names on both sides: listen(\'BarFold\') receives NOTIFY BARFOLD', { timeout: WAIT_MS }, async () => {
    const ch = await record('BarFold')
    const next = ch.next()
    await db.exec("NOTIFY BARFOLD, 'folded too'")
    expect(await next).toBe('folded too')
  })

  it('keeps the case of a quoted channel name: listen(\'"FooQuoted"\') receives NOTIFY "FooQuoted"', { timeout: WAIT_MS }, async () => {
    const ch = await record('"FooQuoted"')
    const next = ch.next()
    await db.exec(`NOTIFY "FooQuoted", 'quoted'`)
    expect(await next).toBe('quoted')
  })

  it('does not deliver NOTIFY of the lower-cased name to a quoted mixed-case channel', { timeout: WAIT_MS }, async () => {
    const ch = await record('"MixedOnly"')
    const sentinel = await record('n_sentinel_case')
    const next = sentinel.next()
    await db.exec("NOTIFY mixedonly, 'wrong'; NOTIFY n_sentinel_case")
    await next
    expect(ch.payloads).toEqual([])
  })

  it('stops delivery after the returned unsubscribe function is called', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_unsub')
    const sentinel = await record('n_sentinel_unsub')
    const first = ch.next()
    await db.exec("NOTIFY n_unsub, 'before'")
    await first
    await ch.unsubscribe()
    const next = sentinel.next()
    await db.exec("NOTIFY n_unsub, 'after'; NOTIFY n_sentinel_unsub")
    await next
    expect(ch.payloads).toEqual(['before'])
  })

  it('keeps delivering to the other listener of a channel when one unsubscribes', { timeout: WAIT_MS }, async () => {
    const a = await record('n_two')
    const b = await record('n_two')
    await a.unsubscribe()
    const next = b.next()
    await db.exec("NOTIFY n_two, 'still'")
    expect(await next).toBe('still')
    expect(a.payloads).toEqual([])
  })

  it('stops every listener of a channel after unlisten(channel)', { timeout: WAIT_MS }, async () => {
    const a = await record('n_unlisten')
    const b = await record('n_unlisten')
    const sentinel = await record('n_sentinel_unlisten')
    await db.unlisten('n_unlisten')
    const next = sentinel.next()
    await db.exec("NOTIFY n_unlisten, 'after'; NOTIFY n_sentinel_unlisten")
    await next
    expect(a.payloads).toEqual([])
    expect(b.payloads).toEqual([])
  })

  it('really UNLISTENs the session once no listener is left', async () => {
    const ch = await record('n_session')
    const listening = async () =>
      (await db.exec('select pg_listening_channels() as c'))[0]!.rows.map((r) => r.c as string)
    expect(await listening()).toContain('n_session')
    await ch.unsubscribe()
    expect(await listening()).not.toContain('n_session')
  })
})

describe('onNotification()', () => {
  it('receives the channel and payload of every notification', { timeout: WAIT_MS }, async () => {
    const ch = await record('n_global')
    const got = deferred<[string, string]>()
    const off = db.onNotification((channel, payload) => {
      if (channel === 'n_global') got.resolve([channel, payload])
    })
    await db.exec("NOTIFY n_global, 'everywhere'")
    expect(await got.promise).toEqual(['n_global', 'everywhere'])
    off()
    await ch.unsubscribe()
  })

  it('stops calling a callback after the function it returned is called', { timeout: WAIT_MS }, async () => {
    await record('n_global_off')
    const calls: string[] = []
    const off = db.onNotification((_channel, payload) => calls.push(payload))
    const first = deferred()
    const stopFirst = db.onNotification(() => first.resolve())
    await db.exec("NOTIFY n_global_off, 'one'")
    await first.promise
    stopFirst()
    off()
    const second = deferred()
    const stopSecond = db.onNotification(() => second.resolve())
    await db.exec("NOTIFY n_global_off, 'two'")
    await second.promise
    stopSecond()
    expect(calls).toEqual(['one'])
  })
})

describe('a listener that throws', () => {
  it('does not break the database or the other listeners', { timeout: WAIT_MS }, async () => {
    const thrown = new Error('listener failure')
    // A throwing listener surfaces as an uncaught exception (as in PGlite,
    // listeners run in microtasks); capture it instead of vitest.
    const uncaught: unknown[] = []
    const saved = process.listeners('uncaughtException')
    process.removeAllListeners('uncaughtException')
    const capture = (e: unknown): void => {
      uncaught.push(e)
    }
    process.on('uncaughtException', capture)
    try {
      await db.listen('n_throw', () => {
        throw thrown
      })
      const good = await record('n_throw')
      const first = good.next()
      await db.exec("NOTIFY n_throw, 'one'")
      expect(await first).toBe('one')
      const { rows } = await db.query('select $1::int as ok', [1])
      expect(rows).toEqual([{ ok: 1 }])
      const second = good.next()
      await db.query("NOTIFY n_throw, 'two'")
      expect(await second).toBe('two')
      await db.unlisten('n_throw')
    } finally {
      process.off('uncaughtException', capture)
      for (const listener of saved) process.on('uncaughtException', listener)
    }
    // One throw per delivered notification: the listener ran and its error
    // reached the process, neither swallowed nor replaced.
    expect(uncaught).toEqual([thrown, thrown])
    expect(uncaught[0]).toBe(thrown)
  })
})
