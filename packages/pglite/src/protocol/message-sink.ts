import { Parser } from 'pg-protocol/dist/parser.js'
import type { BackendMessage } from 'pg-protocol/dist/messages.js'
import { Backend } from '../engine/wire/message-codes.js'
import type { FrameSink } from './frames.js'
import { readDatabaseError, readNotification, readServerFields, type NoticeFields, type Notification } from './messages.js'
import type { DatabaseError } from '../errors.js'

export type { BackendMessage }

/**
 * Decodes every frame into pg-protocol's message objects, the shape
 * `@electric-sql/pglite` returns from `execProtocol`, so code that inspects
 * them works unchanged. Not the hot path: `query()` uses ResultCollector.
 */
export class MessageSink implements FrameSink {
  messages: BackendMessage[] = []
  error: DatabaseError | undefined
  notices: NoticeFields[] | undefined
  notifications: Notification[] | undefined
  readonly #parser = new Parser()
  readonly #push = (message: BackendMessage): void => {
    this.messages.push(message)
  }

  reset(): this {
    this.messages = []
    this.error = undefined
    this.notices = undefined
    this.notifications = undefined
    return this
  }

  onFrame(type: number, buf: Uint8Array, start: number, end: number): void {
    // The frame (header included) is copied: pg-protocol keeps views of it.
    this.#parser.parse(Buffer.from(buf.subarray(start - 5, end)), this.#push)
    if (type === Backend.ErrorResponse) this.error ??= readDatabaseError(buf, start, end)
    else if (type === Backend.NoticeResponse) (this.notices ??= []).push(readServerFields(buf, start, end))
    else if (type === Backend.NotificationResponse) (this.notifications ??= []).push(readNotification(buf, start, end))
  }
}
