/** `PGlite.lease()`: the instance's queue held for one caller, who runs raw execs on its one backend session. */
import type { Backend } from '../engine/backend/backend.js'
import type { EngineError } from '../engine/engine-error.js'
import { ClosedError } from '../errors.js'
import type { EngineLease } from '../lease-types.js'
import type { NotifyRegistry } from '../notify.js'
import type { ExecQueue } from '../query/queue.js'
import type { ProtocolExec } from './protocol-exec.js'

/** What a lease needs of its instance. */
export interface LeaseHost {
  readonly queue: ExecQueue
  readonly notify: NotifyRegistry
  readonly protocol: ProtocolExec
  readonly closed: boolean
  /** The engine now (a directory database may have started a new one). */
  readonly backend: Backend
  /** How many times the engine was started again after it died. */
  readonly restarts: number
  closedFailure(): Error
  /** In the queue, after the engine died under the lease: start it again or close. */
  afterDeath(dead: Backend): Promise<unknown>
  /** How a death an exec met reads while the lease still holds the queue. */
  diedUnderLease(dead: Backend): EngineError
}

/** Takes the host's queue (the instance is started) and hands out the lease on its engine. */
export async function takeLease(host: LeaseHost): Promise<EngineLease> {
  const { notify, queue, protocol } = host
  let release!: () => void
  const held = new Promise<void>((resolve) => {
    release = resolve
  })
  let backend!: Backend
  await new Promise<void>((acquired, failed) => {
    queue
      .run(async () => {
        if (host.closed) throw host.closedFailure()
        backend = host.backend
        acquired()
        await held
        // A death under the lease: the engine starts again before the next turn.
        if (backend.deadError) await host.afterDeath(backend)
      })
      .catch(failed)
  })
  const restarts = host.restarts
  let released = false
  return {
    execProtocolRawStream: (message, onRawData) => {
      if (released) throw new ClosedError('the lease was released')
      if (host.closed) throw host.closedFailure()
      try {
        const kind = protocol.checkInput(message)
        if (kind !== 'terminate') protocol.runRaw(backend, message, onRawData, kind)
      } catch (err) {
        if (!backend.deadError) throw err
        throw host.diedUnderLease(backend)
      }
    },
    restarts,
    get inTransaction() {
      return !released && !backend.deadError && backend.inTransaction
    },
    get sessionTimeouts() {
      return backend.sessionTimeouts
    },
    get listeningChannels() {
      return notify.channels
    },
    get othersWaiting() {
      return queue.hasWaiters
    },
    whenOthersWait: (callback) => {
      if (!released) queue.onWaiter = callback
    },
    runFor: (client) => {
      if (!released) backend.setClient(client)
    },
    limitTime: (ms) => {
      if (!released) backend.timeLimitMs = ms
    },
    stopWhen: (check) => {
      if (!released) backend.stopWhen = check
    },
    whileBusy: (beat) => {
      if (!released) backend.whileBusy = beat
    },
    copyInFrom: (next) => {
      if (!released) backend.copyInSource = next
    },
    forgetClient: (id) => {
      backend.forgetClient(id)
    },
    takeTerminations: () => backend.takeTerminations(),
    advisoryLockHolders: (key) => backend.advisoryLockHolders(key),
    takeRefusedLock: () => backend.takeRefusedLock(),
    get requests() {
      return backend.requests
    },
    get catalogChanges() {
      return backend.catalogChanges
    },
    memoryShare: () => backend.memoryShare(),
    reportActivity: (rows) => {
      backend.activity = rows
    },
    get advisoryReleases() {
      return backend.advisoryReleases
    },
    get blockBoundCalls() {
      return backend.blockBoundCalls
    },
    transactionBlock: () => (released ? undefined : backend.transactionBlock()),
    release: () => {
      if (!released) {
        queue.onWaiter = undefined
        backend.setClient(undefined)
        backend.timeLimitMs = undefined
        backend.stopWhen = undefined
        backend.copyInSource = undefined
      }
      released = true
      release()
    },
  }
}
