import { describe, expect, it } from 'vitest'
import { AuthThrottle } from '../src/session/auth-throttle.js'

/** A clock the test moves by hand. */
function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000
  return { now: () => t, advance: (ms) => (t += ms) }
}

describe('AuthThrottle', () => {
  it('lets an address that never failed check its password at once', () => {
    const c = clock()
    const throttle = new AuthThrottle(100, 5_000, c.now)
    expect(throttle.delayFor('10.0.0.1')).toBe(0)
    expect(throttle.delayFor('10.0.0.1')).toBe(0)
  })

  it('spaces out attempts after failures, doubling per failure, parallel ones included', () => {
    const c = clock()
    const throttle = new AuthThrottle(100, 5_000, c.now)
    throttle.failed('a')
    expect(throttle.delayFor('a')).toBe(100)
    // A second connection at the same moment waits its own turn after the first.
    expect(throttle.delayFor('a')).toBe(200)
    c.advance(200)
    throttle.failed('a')
    throttle.failed('a')
    expect(throttle.delayFor('a')).toBeGreaterThanOrEqual(400)
    expect(throttle.delayFor('b')).toBe(0)
  })

  it('caps the delay and forgets an address after a success', () => {
    const c = clock()
    const throttle = new AuthThrottle(100, 1_000, c.now)
    for (let i = 0; i < 20; i++) throttle.failed('a')
    c.advance(10_000)
    expect(throttle.delayFor('a')).toBe(0)
    expect(throttle.delayFor('a')).toBe(1_000)
    throttle.succeeded('a')
    expect(throttle.delayFor('a')).toBe(0)
  })
})
