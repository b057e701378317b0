import type { Notification } from './protocol/messages.js'

export type ChannelListener = (payload: string) => void
export type NotificationListener = (channel: string, payload: string) => void

/** Postgres folds an unquoted identifier to lower case; a quoted one is kept. */
export function toChannelName(channel: string): string {
  if (channel.length >= 2 && channel.startsWith('"') && channel.endsWith('"')) {
    return channel.slice(1, -1).replace(/""/g, '"')
  }
  return channel.toLowerCase()
}

/** The `listen` / `onNotification` listeners of one instance and their dispatch. */
export class NotifyRegistry {
  readonly #byChannel = new Map<string, Set<ChannelListener>>()
  readonly #global = new Set<NotificationListener>()

  /** Whether any listener exists: raw execs then scan for notifications. */
  get hasListeners(): boolean {
    return this.#byChannel.size > 0 || this.#global.size > 0
  }

  /** Channels with at least one `listen()` callback. */
  get channels(): string[] {
    return [...this.#byChannel.keys()]
  }

  add(channel: string, listener: ChannelListener): void {
    let set = this.#byChannel.get(channel)
    if (!set) this.#byChannel.set(channel, (set = new Set()))
    set.add(listener)
  }

  /** Removes one listener (or all of the channel's); true when the channel has none left. */
  remove(channel: string, listener?: ChannelListener): boolean {
    const set = this.#byChannel.get(channel)
    if (!set) return true
    if (listener) set.delete(listener)
    else set.clear()
    if (set.size > 0) return false
    this.#byChannel.delete(channel)
    return true
  }

  addGlobal(listener: NotificationListener): void {
    this.#global.add(listener)
  }

  removeGlobal(listener: NotificationListener): void {
    this.#global.delete(listener)
  }

  /**
   * Calls listeners in microtasks, after the exec that carried the
   * notifications: a listener never runs inside an engine call, and one that
   * throws cannot break the exec.
   */
  dispatch(notifications: readonly Notification[]): void {
    for (const { channel, payload } of notifications) {
      const set = this.#byChannel.get(channel)
      if (set) for (const listener of set) queueMicrotask(() => listener(payload))
      for (const listener of this.#global) queueMicrotask(() => listener(channel, payload))
    }
  }

  clear(): void {
    this.#byChannel.clear()
    this.#global.clear()
  }
}
