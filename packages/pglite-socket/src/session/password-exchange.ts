/**
 * One client's password exchange, as PostgreSQL runs it: SCRAM-SHA-256
 * (protocol "SASL Authentication"), MD5 or cleartext. Messages are whole
 * frames (type byte, length, body).
 *
 * It imports nothing and closes over nothing, and takes Node's crypto module
 * as an argument: the cancel helper (net/cancel-helper-program.ts) runs the
 * text of this function as it is (`toString()`) to log clients in while the
 * server's thread runs a statement, so both check passwords with one code.
 */
export function passwordExchange(crypto: typeof import('node:crypto'), method: 'scram-sha-256' | 'md5' | 'password', password: string, user: string) {
  const ITERATIONS = 4096
  const frame = (code: number, body: Buffer): Buffer => {
    const head = Buffer.alloc(9)
    head.write('R', 0, 'latin1')
    head.writeInt32BE(body.length + 8, 1)
    head.writeInt32BE(code, 5)
    return Buffer.concat([head, body])
  }
  const cstring = (bytes: Uint8Array, at: number): [string, number] => {
    let end = at
    while (end < bytes.length && bytes[end] !== 0) end++
    return [Buffer.from(bytes.subarray(at, end)).toString('utf8'), end + 1]
  }
  const same = (a: Buffer, b: Buffer): boolean => a.length === b.length && crypto.timingSafeEqual(a, b)
  const md5Salt = crypto.randomBytes(4)
  let scram: { bare: string; serverFirst: string; nonce: string; salt: Buffer } | undefined
  type Step = { done: false; reply: Buffer } | { done: true; ok: boolean; reply?: Buffer }

  function scramFirst(body: Uint8Array): Step {
    const [mechanism, at] = cstring(body, 0)
    if (mechanism !== 'SCRAM-SHA-256' || at + 4 > body.length) return { done: true, ok: false }
    const length = Buffer.from(body.subarray(at, at + 4)).readInt32BE(0)
    const clientFirst = Buffer.from(body.subarray(at + 4, at + 4 + Math.max(0, length))).toString('utf8')
    // gs2 header "n,," (no channel binding): the bare message follows it.
    const bare = clientFirst.replace(/^[nyp][^,]*,[^,]*,/, '')
    const clientNonce = /(?:^|,)r=([^,]+)/.exec(bare)?.[1]
    if (!clientNonce) return { done: true, ok: false }
    const nonce = clientNonce + crypto.randomBytes(18).toString('base64')
    const salt = crypto.randomBytes(16)
    const serverFirst = `r=${nonce},s=${salt.toString('base64')},i=${ITERATIONS}`
    scram = { bare, serverFirst, nonce, salt }
    return { done: false, reply: frame(11, Buffer.from(serverFirst)) }
  }

  function scramFinal(body: Uint8Array): Step {
    const state = scram!
    const clientFinal = Buffer.from(body).toString('utf8')
    const proofAt = clientFinal.lastIndexOf(',p=')
    if (proofAt < 0) return { done: true, ok: false }
    const withoutProof = clientFinal.slice(0, proofAt)
    if (/(?:^|,)r=([^,]+)/.exec(withoutProof)?.[1] !== state.nonce) return { done: true, ok: false }
    const proof = Buffer.from(clientFinal.slice(proofAt + 3), 'base64')
    const salted = crypto.pbkdf2Sync(password.normalize('NFKC'), state.salt, ITERATIONS, 32, 'sha256')
    const storedKey = crypto.createHash('sha256').update(crypto.createHmac('sha256', salted).update('Client Key').digest()).digest()
    const authMessage = `${state.bare},${state.serverFirst},${withoutProof}`
    const clientSignature = crypto.createHmac('sha256', storedKey).update(authMessage).digest()
    if (proof.length !== clientSignature.length) return { done: true, ok: false }
    const recoveredKey = Buffer.alloc(proof.length)
    for (let i = 0; i < proof.length; i++) recoveredKey[i] = proof[i]! ^ clientSignature[i]!
    if (!same(crypto.createHash('sha256').update(recoveredKey).digest(), storedKey)) return { done: true, ok: false }
    const serverKey = crypto.createHmac('sha256', salted).update('Server Key').digest()
    const serverSignature = crypto.createHmac('sha256', serverKey).update(authMessage).digest('base64')
    return { done: true, ok: true, reply: frame(12, Buffer.from(`v=${serverSignature}`)) }
  }

  return {
    /** The first Authentication request to send. */
    begin(): Buffer {
      if (method === 'password') return frame(3, Buffer.alloc(0))
      if (method === 'md5') return frame(5, md5Salt)
      return frame(10, Buffer.from('SCRAM-SHA-256\0\0', 'latin1'))
    },
    /** Takes one PasswordMessage / SASL response body (after the 5-byte header). */
    step(body: Uint8Array): Step {
      if (method === 'password') return { done: true, ok: same(Buffer.from(cstring(body, 0)[0]), Buffer.from(password)) }
      if (method === 'md5') {
        const inner = crypto.createHash('md5').update(password + user).digest('hex')
        const expected = 'md5' + crypto.createHash('md5').update(inner).update(md5Salt).digest('hex')
        return { done: true, ok: same(Buffer.from(cstring(body, 0)[0]), Buffer.from(expected)) }
      }
      return scram ? scramFinal(body) : scramFirst(body)
    },
  }
}

/** One client's exchange, as {@link passwordExchange} makes it. */
export type PasswordExchange = ReturnType<typeof passwordExchange>
