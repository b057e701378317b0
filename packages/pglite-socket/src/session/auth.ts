import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto'
import { Msg, concat, cstrings, frame, int32s, readCString, readInt32 } from '../wire/wire.js'

/** How clients prove they know the password. */
export const AUTH_METHODS = ['scram-sha-256', 'md5', 'password'] as const
export type AuthMethod = (typeof AUTH_METHODS)[number]

export type AuthStep = { reply: Uint8Array; done: false } | { done: true; ok: boolean; reply?: Uint8Array }

const SCRAM_ITERATIONS = 4096

/** One client's password exchange (protocol "SASL Authentication", MD5, cleartext). */
export class Authenticator {
  readonly #method: AuthMethod
  readonly #password: string
  readonly #user: string
  #md5Salt = randomBytes(4)
  #scram: { clientFirstBare: string; serverFirst: string; nonce: string; salt: Buffer } | undefined

  constructor(method: AuthMethod, password: string, user: string) {
    this.#method = method
    this.#password = password
    this.#user = user
  }

  /** The first Authentication request to send. */
  begin(): Uint8Array {
    switch (this.#method) {
      case 'password':
        return frame(Msg.Authentication, int32s(3))
      case 'md5':
        return frame(Msg.Authentication, concat([int32s(5), this.#md5Salt]))
      case 'scram-sha-256':
        return frame(Msg.Authentication, concat([int32s(10), cstrings('SCRAM-SHA-256', '')]))
    }
  }

  /** Handles one PasswordMessage / SASL response body (after the 5-byte header). */
  step(body: Uint8Array): AuthStep {
    switch (this.#method) {
      case 'password':
        return { done: true, ok: safeEqual(readCString(body, 0, body.length)[0], this.#password) }
      case 'md5': {
        const inner = createHash('md5').update(this.#password + this.#user).digest('hex')
        const expected = 'md5' + createHash('md5').update(inner).update(this.#md5Salt).digest('hex')
        return { done: true, ok: safeEqual(readCString(body, 0, body.length)[0], expected) }
      }
      case 'scram-sha-256':
        return this.#scram ? this.#scramFinal(body) : this.#scramFirst(body)
    }
  }

  #scramFirst(body: Uint8Array): AuthStep {
    const [mechanism, at] = readCString(body, 0, body.length)
    if (mechanism !== 'SCRAM-SHA-256') return { done: true, ok: false }
    const length = readInt32(body, at)
    const clientFirst = Buffer.from(body.subarray(at + 4, at + 4 + length)).toString('utf8')
    // gs2 header "n,," (no channel binding): the bare message follows it.
    const bare = clientFirst.replace(/^[nyp][^,]*,[^,]*,/, '')
    const clientNonce = /(?:^|,)r=([^,]+)/.exec(bare)?.[1]
    if (!clientNonce) return { done: true, ok: false }
    const nonce = clientNonce + randomBytes(18).toString('base64')
    const salt = randomBytes(16)
    const serverFirst = `r=${nonce},s=${salt.toString('base64')},i=${SCRAM_ITERATIONS}`
    this.#scram = { clientFirstBare: bare, serverFirst, nonce, salt }
    return { done: false, reply: frame(Msg.Authentication, concat([int32s(11), Buffer.from(serverFirst)])) }
  }

  #scramFinal(body: Uint8Array): AuthStep {
    const state = this.#scram!
    const clientFinal = Buffer.from(body).toString('utf8')
    const proofAt = clientFinal.lastIndexOf(',p=')
    if (proofAt < 0) return { done: true, ok: false }
    const withoutProof = clientFinal.slice(0, proofAt)
    if (/(?:^|,)r=([^,]+)/.exec(withoutProof)?.[1] !== state.nonce) return { done: true, ok: false }
    const proof = Buffer.from(clientFinal.slice(proofAt + 3), 'base64')
    const salted = pbkdf2Sync(this.#password.normalize('NFKC'), state.salt, SCRAM_ITERATIONS, 32, 'sha256')
    const clientKey = createHmac('sha256', salted).update('Client Key').digest()
    const storedKey = createHash('sha256').update(clientKey).digest()
    const authMessage = `${state.clientFirstBare},${state.serverFirst},${withoutProof}`
    const clientSignature = createHmac('sha256', storedKey).update(authMessage).digest()
    if (proof.length !== clientSignature.length) return { done: true, ok: false }
    const recoveredKey = Buffer.alloc(proof.length)
    for (let i = 0; i < proof.length; i++) recoveredKey[i] = proof[i]! ^ clientSignature[i]!
    const ok = timingSafeEqual(createHash('sha256').update(recoveredKey).digest(), storedKey)
    if (!ok) return { done: true, ok: false }
    const serverKey = createHmac('sha256', salted).update('Server Key').digest()
    const serverSignature = createHmac('sha256', serverKey).update(authMessage).digest('base64')
    return { done: true, ok: true, reply: frame(Msg.Authentication, concat([int32s(12), Buffer.from(`v=${serverSignature}`)])) }
  }
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}
