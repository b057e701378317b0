/**
 * The prisma-pglite-bridge path in its own process, so it can run on the
 * Node it requires (>= 22) while the suite runs on the repo's Node 20; and
 * our adapter on that same Node, so the two compare on one runtime. The
 * suite sends a `setup`, then one `round` per turn of the interleaving
 * (timed here with the harness's timeRound, the same tinybench settings as
 * the in-process paths), then `close`; see BridgeRequest/BridgeReply.
 */
import { errorText, timeRound } from '../harness.js'
import { ITEM_DDL, ITEM_SEED, loadPrismaClient, type BenchPrisma } from '../prisma-client.js'
import { prismaTask, type BridgeReply, type BridgeRequest, type PrismaCase } from '../prisma-workload.js'

interface Bridge {
  adapter: object
  pglite: { exec(sql: string): Promise<unknown> }
  close(): Promise<void>
}

/**
 * On Node 20 the bridge needs only `Promise.withResolvers` (Node 22; its
 * session lock and pool use it). Semantics as specified, so the path does
 * the same work as on Node 24.
 */
function polyfill(): string[] {
  const P = Promise as unknown as { withResolvers?: unknown }
  if (typeof P.withResolvers === 'function') return []
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    value: function withResolvers<T>(this: PromiseConstructor) {
      let resolve!: (value: T | PromiseLike<T>) => void
      let reject!: (reason?: unknown) => void
      const promise = new this<T>((res, rej) => {
        resolve = res
        reject = rej
      })
      return { promise, resolve, reject }
    },
  })
  return ['Promise.withResolvers']
}

function send(reply: BridgeReply): void {
  process.send!(reply)
}

let bridge: Pick<Bridge, 'close'> | undefined
let prisma: BenchPrisma | undefined
const tasks = new Map<PrismaCase, () => Promise<unknown>>()

async function handle(req: BridgeRequest): Promise<void> {
  if (req.type === 'setup') {
    const polyfilled = req.target === 'bridge' ? polyfill() : []
    const PrismaClient = await loadPrismaClient()
    if (req.target === 'bridge') {
      const { PGliteBridge } = (await import('prisma-pglite-bridge')) as unknown as { PGliteBridge: new () => Bridge }
      const b = new PGliteBridge()
      bridge = b
      await b.pglite.exec(`${ITEM_DDL};\n${ITEM_SEED}`)
      prisma = new PrismaClient({ adapter: b.adapter })
    } else {
      const [{ PGlite }, { PrismaPGlite, prismaOptions }] = await Promise.all([import('@pgwasm/pglite'), import('@pgwasm/pglite-prisma')])
      // As the package README sets an instance up for Prisma, like the suite's own pgwasm row.
      const db = await PGlite.create(prismaOptions)
      await db.exec(`${ITEM_DDL};\n${ITEM_SEED}`)
      bridge = { close: () => db.close() }
      prisma = new PrismaClient({ adapter: new PrismaPGlite(db) })
    }
    await prisma.$connect()
    send({ type: 'ready', node: process.version, polyfilled })
  } else if (req.type === 'round') {
    if (!prisma) throw new Error('round before setup')
    // One function per case for the whole run, so its call counter (row ids, values) carries across rounds.
    let fn = tasks.get(req.case)
    if (!fn) tasks.set(req.case, (fn = prismaTask(req.case, prisma)))
    send({ type: 'samples', seq: req.seq, samples: await timeRound(req.case, fn, req.iterations, req.warmup) })
  } else {
    await prisma?.$disconnect()
    await bridge?.close()
    process.exit(0)
  }
}

process.on('message', (req: BridgeRequest) => {
  handle(req).catch((err: unknown) => send({ type: 'error', ...(req.type === 'round' ? { seq: req.seq } : {}), message: errorText(err) }))
})
process.on('disconnect', () => process.exit(0))
