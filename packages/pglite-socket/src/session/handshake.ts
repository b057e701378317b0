import { Frontend } from '@pgwasm/pglite/protocol'
import * as crypto from 'node:crypto'
import type { Multiplexer, MuxClient } from '../pooler/multiplexer.js'
import { assumedReported } from '../pooler/reported-settings.js'
import { passwordExchange, type PasswordExchange } from './password-exchange.js'
import type { ClientReports } from './client-reports.js'
import { isTerminate } from './frame-edits.js'
import type { SessionHost, Transport } from './session-host.js'
import { readStartupRequest, type StartupParams } from './startup.js'
import type { FrameReader } from '../wire/frame-reader.js'

/** The answer to an SSLRequest or GSSENCRequest: go on unencrypted. */
const NO_ENCRYPTION = new Uint8Array([0x4e /* N */])

/** What a connection's startup and password exchange need of its session. */
export interface HandshakeHost {
  readonly input: FrameReader
  readonly transport: Pick<Transport, 'write' | 'remoteAddress'>
  readonly server: Pick<SessionHost, 'password' | 'authMethod' | 'authThrottle' | 'authenticationTimeoutMs' | 'cancel' | 'log' | 'database' | 'serverVersion'>
  readonly processId: number
  /** The session as its multiplexer knows it. */
  readonly client: MuxClient
  readonly reports: ClientReports
  isClosed(): boolean
  close(): void
  fatal(code: string, message: string): void
  /** Its startup packet was read: its parameters are its first settings. */
  startup(request: StartupParams): void
  /** 'auth': the client was asked for its password (what it sends next goes to {@link Handshake.readAuth}); 'attach': it waits for its database. */
  enter(phase: 'auth' | 'attach'): void
  /** Its database's multiplexer, found or started. */
  attached(mux: Multiplexer): void
  /** The client is in: it is sent its startup reply and its frames are read. */
  ready(): void
}

/**
 * A connection's way in: its startup packet (or SSLRequest or
 * CancelRequest), the password exchange when the server asks one, its
 * database and login, and the time it may take for them.
 */
export class Handshake {
  readonly #host: HandshakeHost
  /** The cancel helper started the client (its startup came from there). */
  readonly #startedElsewhere: boolean
  #user = 'postgres'
  #applicationName = ''
  #database = 'postgres'
  #auth: PasswordExchange | undefined
  /** This connection's password attempt took its turn with the throttle. */
  #throttled = false
  #authTimer: ReturnType<typeof setTimeout> | undefined

  constructor(host: HandshakeHost, startedElsewhere: boolean) {
    this.#host = host
    this.#startedElsewhere = startedElsewhere
    const ms = host.server.authenticationTimeoutMs
    if (ms > 0) {
      // PostgreSQL's authentication_timeout: a stalled startup must not keep a connection slot.
      this.#authTimer = setTimeout(() => host.close(), ms)
      this.#authTimer.unref?.()
    }
  }

  get user(): string {
    return this.#user
  }

  get applicationName(): string {
    return this.#applicationName
  }

  get database(): string {
    return this.#database
  }

  /** Reads the first packet. @returns whether the session reads on at once. */
  readStartup(): boolean {
    const host = this.#host
    const input = host.input
    if (isTerminate(input.bytes, input.offset, input.buffered)) {
      // A client that ends before it starts (node-postgres' connect() then
      // end() at once sends its Terminate first): Postgres closes without a word.
      host.server.log(`session ${host.processId}: ended before its startup packet`)
      host.close()
      return false
    }
    const packet = input.startupPacket()
    if (!packet) return false
    const request = readStartupRequest(packet)
    switch (request.kind) {
      case 'encryption':
        // No TLS or GSS here: the client goes on in the clear (or gives up).
        host.transport.write(NO_ENCRYPTION)
        return true
      case 'cancel':
        host.server.cancel(request.processId, request.secret)
        host.close()
        return false
      case 'unsupported':
        host.fatal('0A000', `unsupported frontend protocol ${request.version}: server supports 3.0`)
        return false
      case 'refused':
        host.fatal(request.code, request.message)
        return false
      case 'startup':
        if (host.server.password !== undefined) {
          this.#takeStartup(request)
          // Nothing that costs the server (an instance for a new database name) before the password.
          this.#auth = passwordExchange(crypto, host.server.authMethod, host.server.password, this.#user)
          host.enter('auth')
          host.transport.write(this.#auth.begin())
          return true
        }
        this.begin(request)
        return false
    }
  }

  /** Takes a startup packet and attaches to its database (no password asked). */
  begin(request: StartupParams): void {
    this.#takeStartup(request)
    void this.#attach()
  }

  #takeStartup(request: StartupParams): void {
    this.#user = request.user
    this.#applicationName = request.applicationName
    this.#host.startup(request)
    this.#database = request.database
    this.#host.server.log(
      `session ${this.#host.processId}: startup user=${request.user} database=${request.database}${this.#startedElsewhere ? ' (started by the cancel helper)' : ''}`,
    )
  }

  /** Reads a password message. @returns whether the session reads on at once. */
  async readAuth(): Promise<boolean> {
    const host = this.#host
    const message = host.input.frame(false)
    if (!message) return false
    if (message[0] !== Frontend.Password) {
      host.fatal('08P01', `expected a password message, got type 0x${message[0]!.toString(16)}`)
      return false
    }
    const throttle = host.server.authThrottle
    const address = host.transport.remoteAddress ?? ''
    const wait = this.#throttled ? 0 : throttle.delayFor(address)
    this.#throttled = true
    // An address that just failed waits its turn (parallel connections too): guessing stays slow.
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    if (host.isClosed()) return false
    const step = this.#auth!.step(message.subarray(5))
    if (step.reply) host.transport.write(step.reply)
    if (!step.done) return true
    if (!step.ok) {
      throttle.failed(address)
      host.fatal('28P01', `password authentication failed for user "${this.#user}"`)
      return false
    }
    throttle.succeeded(address)
    void this.#attach()
    return false
  }

  /** The client is who it says (or no password is asked): it attaches to its database and logs in. */
  async #attach(): Promise<void> {
    const host = this.#host
    const database = this.#database
    host.enter('attach')
    let mux: Multiplexer
    try {
      mux = await host.server.database(database)
      host.attached(mux)
    } catch (err) {
      const unknown = err instanceof Error && (err as Error & { code?: unknown }).code === 'UNKNOWN_DATABASE'
      host.fatal('3D000', unknown ? err.message : `database "${database}" is not available: ${err instanceof Error ? err.message : String(err)}`)
      return
    }
    if (host.isClosed()) return
    const refusal = await this.#login(mux)
    if (host.isClosed()) return
    if (refusal) {
      host.fatal('28000', refusal)
      return
    }
    this.stopTimer()
    host.ready()
  }

  /**
   * Learns what the client is told at startup, and why the role it logs in
   * as may not log in, as Postgres says it: the role must exist and have
   * LOGIN (the client then runs as the engine's superuser or the `role`
   * option's role; see the README).
   */
  async #login(mux: Multiplexer): Promise<string | undefined> {
    const host = this.#host
    const user = this.#user
    let facts: Awaited<ReturnType<Multiplexer['login']>> | undefined
    try {
      facts = await mux.login(host.client, user)
    } catch {
      facts = undefined // The engine died: the first batch reports it.
    }
    host.reports.loggedIn(facts?.reported, () => assumedReported(user, this.#applicationName, host.server.serverVersion))
    // The in-process bridge is the embedding application itself, under any name.
    if (host.transport.remoteAddress === undefined) return undefined
    if (facts?.role === 'missing') return `role "${user}" does not exist`
    if (facts?.role === 'nologin') return `role "${user}" is not permitted to log in`
    return undefined
  }

  /** The client is in (or gone): the time allowed for its way in no longer runs. */
  stopTimer(): void {
    if (this.#authTimer) clearTimeout(this.#authTimer)
    this.#authTimer = undefined
  }
}
