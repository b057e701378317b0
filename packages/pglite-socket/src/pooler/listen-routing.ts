import type { EngineLease } from '@pgwasm/pglite'
import { discardsListens, findListenChanges, quoteChannel } from '../sql/listen.js'
import type { Multiplexer, MuxClient } from './multiplexer.js'
import { queryMessage } from '../wire/wire.js'

/**
 * One client's LISTENs on the shared backend session: which channels the
 * multiplexer routes to it, and putting back the LISTENs other clients (or
 * the instance's own `listen()`) still need after this client's UNLISTEN.
 */
export class ListenRouting {
  readonly #mux: Multiplexer
  readonly #client: MuxClient
  readonly #channels = new Set<string>()
  #relistening = false

  constructor(mux: Multiplexer, client: MuxClient) {
    this.#mux = mux
    this.#client = client
  }

  /**
   * Routes after the LISTEN / UNLISTEN in `sql`.
   * @returns whether the engine's LISTEN set may change (then call {@link relisten} after running it).
   */
  note(sql: string): boolean {
    const changes = findListenChanges(sql)
    if (changes) {
      for (const ch of changes.listen) this.heard('listen', ch)
      if (changes.unlistenAll) this.heard('unlisten', null)
      for (const ch of changes.unlisten) this.heard('unlisten', ch)
    }
    return changes !== undefined || discardsListens(sql)
  }

  /**
   * Routes after one LISTEN or UNLISTEN (`null`: all of this client's) the
   * engine is running for this client, wherever its SQL put it (a DO
   * block's dynamic SQL too); then call {@link relisten}.
   */
  heard(kind: 'listen' | 'unlisten', channel: string | null): void {
    // The LISTENs relisten() puts back are everyone's, not this client's.
    if (this.#relistening) return
    if (kind === 'listen') {
      if (channel === null) return
      this.#channels.add(channel)
      this.#mux.listen(this.#client, channel)
      return
    }
    for (const ch of channel === null ? [...this.#channels] : [channel]) {
      this.#channels.delete(ch)
      this.#mux.unlisten(this.#client, ch)
    }
  }

  /** LISTENs again on every channel someone still needs: an UNLISTEN by this client must not end another's. */
  relisten(lease: EngineLease): void {
    const channels = [...new Set([...this.#mux.channels.keys(), ...lease.listeningChannels])]
    if (channels.length === 0) return
    this.#relistening = true
    try {
      lease.execProtocolRawStream(queryMessage(channels.map((c) => `LISTEN ${quoteChannel(c)}`).join(';')), () => {})
    } finally {
      this.#relistening = false
    }
  }

  /** Stops routing to this client; @returns the channels nobody else listens to, to UNLISTEN. */
  drop(): string[] {
    const orphans = [...this.#channels].filter((ch) => this.#mux.unlisten(this.#client, ch))
    this.#channels.clear()
    return orphans
  }
}
