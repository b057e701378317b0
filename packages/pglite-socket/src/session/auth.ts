import * as crypto from 'node:crypto'
import { passwordExchange, type PasswordExchange } from './password-exchange.js'

/** How clients prove they know the password. */
export const AUTH_METHODS = ['scram-sha-256', 'md5', 'password'] as const
export type AuthMethod = (typeof AUTH_METHODS)[number]

export type AuthStep = { reply: Uint8Array; done: false } | { done: true; ok: boolean; reply?: Uint8Array }

/** One client's password exchange (protocol "SASL Authentication", MD5, cleartext); see password-exchange.ts. */
export class Authenticator {
  readonly #exchange: PasswordExchange

  constructor(method: AuthMethod, password: string, user: string) {
    this.#exchange = passwordExchange(crypto, method, password, user)
  }

  /** The first Authentication request to send. */
  begin(): Uint8Array {
    return this.#exchange.begin()
  }

  /** Handles one PasswordMessage / SASL response body (after the 5-byte header). */
  step(body: Uint8Array): AuthStep {
    return this.#exchange.step(body)
  }
}
