/**
 * The decoding loop of lzma.ts, in a file of its own: one function, no
 * closures, the bit decoder written out at each use. The coder's state then
 * stays in registers, several times faster than in fields or in a
 * closure's context (the loop is most of a first visit's decoding time).
 * Follows the reference decoder of the LZMA SDK (LzmaSpec.cpp).
 */

/** A probability's start: one half, of 2^11. */
export const PROB_INIT = 1024
const TOP = 1 << 24
/**
 * Range and code are unsigned 32-bit numbers kept in int32 variables; they
 * are compared with the sign bit flipped (a < b unsigned is (a ^ SIGN) <
 * (b ^ SIGN) signed), since a value at or past 2^31 read through `>>> 0`
 * would leave int32 and cost V8 a deoptimization, once per page.
 */
const SIGN = 0x80000000 | 0
const TOP_SIGNED = TOP ^ SIGN
const LEN_LOW = 8
const LEN_MID = 8
const END_POS_MODEL = 14
const ALIGN_BITS = 4
const MATCH_MIN = 2
/** Offsets into one array of probabilities, as the SDK lays them out. */
const IS_MATCH = 0
const IS_REP = IS_MATCH + (12 << 4)
const IS_REP_G0 = IS_REP + 12
const IS_REP_G1 = IS_REP_G0 + 12
const IS_REP_G2 = IS_REP_G1 + 12
const IS_REP0_LONG = IS_REP_G2 + 12
const POS_SLOT = IS_REP0_LONG + (12 << 4)
const SPEC_POS = POS_SLOT + (4 << 6)
const ALIGN = SPEC_POS + 115
const LEN_CODER = ALIGN + 16
const REP_LEN_CODER = LEN_CODER + 514
export const LITERAL = REP_LEN_CODER + 514
/** Within a length coder: choice, choice2, low[16][8], mid[16][8], high[256]. */
const LEN_CHOICE2 = 1
const LEN_LOW_AT = 2
const LEN_MID_AT = LEN_LOW_AT + (16 << 3)
const LEN_HIGH_AT = LEN_MID_AT + (16 << 3)

/** What the loop reads and updates: `s` holds range, code, input position, output position, state, rep0..3 between calls. */
export interface LzmaCoder {
  readonly s: Float64Array
  readonly out: Uint8Array
  readonly input: Uint8Array
  readonly probs: Uint16Array
  readonly lc: number
  readonly lp: number
  readonly pb: number
}

/** Decodes about `budget` more bytes (at least the rest of a match); @returns whether all are. @throws Error on corrupt data. */
export function decodeRun(run: LzmaCoder, budget: number): boolean {
  const { s, out, input, probs, lc } = run
  const end = out.byteLength
  const inEnd = input.byteLength
  const pbMask = (1 << run.pb) - 1
  const lpMask = (1 << run.lp) - 1
  let range = s[0]! | 0
  let code = s[1]! | 0
  let at = s[2]! | 0
  let pos = s[3]! | 0
  let state = s[4]! | 0
  let rep0 = s[5]! | 0
  let rep1 = s[6]! | 0
  let rep2 = s[7]! | 0
  let rep3 = s[8]! | 0
  const stop = Math.min(end, pos + budget) | 0
  let i = 0
  let p = 0
  let bound = 0
  let b = 0
  let m = 0
  let coder = 0

  while (pos < stop) {
    const posState = pos & pbMask
    i = IS_MATCH + (state << 4) + posState
    p = probs[i]!
    bound = Math.imul(range >>> 11, p)
    if ((code ^ SIGN) < (bound ^ SIGN)) {
      range = bound
      probs[i] = p + ((2048 - p) >>> 5)
      b = 0
    } else {
      range = (range - bound) | 0
      code = (code - bound) | 0
      probs[i] = p - (p >>> 5)
      b = 1
    }
    if ((range ^ SIGN) < TOP_SIGNED) {
      range <<= 8
      code = (code << 8) | input[at++]!
    }
    if (b === 0) {
      const prev = pos > 0 ? out[pos - 1]! : 0
      const base = LITERAL + 0x300 * (((pos & lpMask) << lc) + (prev >>> (8 - lc)))
      m = 1
      if (state >= 7) {
        let match = out[pos - rep0 - 1]!
        do {
          const matchBit = (match >>> 7) & 1
          match <<= 1
          i = base + ((1 + matchBit) << 8) + m
          p = probs[i]!
          bound = Math.imul(range >>> 11, p)
          if ((code ^ SIGN) < (bound ^ SIGN)) {
            range = bound
            probs[i] = p + ((2048 - p) >>> 5)
            b = 0
          } else {
            range = (range - bound) | 0
            code = (code - bound) | 0
            probs[i] = p - (p >>> 5)
            b = 1
          }
          if ((range ^ SIGN) < TOP_SIGNED) {
            range <<= 8
            code = (code << 8) | input[at++]!
          }
          m = (m << 1) | b
          if (matchBit !== b) break
        } while (m < 0x100)
      }
      while (m < 0x100) {
        i = base + m
        p = probs[i]!
        bound = Math.imul(range >>> 11, p)
        if ((code ^ SIGN) < (bound ^ SIGN)) {
          range = bound
          probs[i] = p + ((2048 - p) >>> 5)
          b = 0
        } else {
          range = (range - bound) | 0
          code = (code - bound) | 0
          probs[i] = p - (p >>> 5)
          b = 1
        }
        if ((range ^ SIGN) < TOP_SIGNED) {
          range <<= 8
          code = (code << 8) | input[at++]!
        }
        m = (m << 1) | b
      }
      out[pos++] = m & 0xff
      state = state < 4 ? 0 : state < 10 ? state - 3 : state - 6
      continue
    }
    i = IS_REP + state
    p = probs[i]!
    bound = Math.imul(range >>> 11, p)
    if ((code ^ SIGN) < (bound ^ SIGN)) {
      range = bound
      probs[i] = p + ((2048 - p) >>> 5)
      b = 0
    } else {
      range = (range - bound) | 0
      code = (code - bound) | 0
      probs[i] = p - (p >>> 5)
      b = 1
    }
    if ((range ^ SIGN) < TOP_SIGNED) {
      range <<= 8
      code = (code << 8) | input[at++]!
    }
    if (b !== 0) {
      if (pos === 0) throw new Error('corrupt .lzma data')
      i = IS_REP_G0 + state
      p = probs[i]!
      bound = Math.imul(range >>> 11, p)
      if ((code ^ SIGN) < (bound ^ SIGN)) {
        range = bound
        probs[i] = p + ((2048 - p) >>> 5)
        b = 0
      } else {
        range = (range - bound) | 0
        code = (code - bound) | 0
        probs[i] = p - (p >>> 5)
        b = 1
      }
      if ((range ^ SIGN) < TOP_SIGNED) {
        range <<= 8
        code = (code << 8) | input[at++]!
      }
      if (b === 0) {
        i = IS_REP0_LONG + (state << 4) + posState
        p = probs[i]!
        bound = Math.imul(range >>> 11, p)
        if ((code ^ SIGN) < (bound ^ SIGN)) {
          range = bound
          probs[i] = p + ((2048 - p) >>> 5)
          b = 0
        } else {
          range = (range - bound) | 0
          code = (code - bound) | 0
          probs[i] = p - (p >>> 5)
          b = 1
        }
        if ((range ^ SIGN) < TOP_SIGNED) {
          range <<= 8
          code = (code << 8) | input[at++]!
        }
        if (b === 0) {
          state = state < 7 ? 9 : 11
          out[pos] = out[pos - rep0 - 1]!
          pos++
          continue
        }
      } else {
        let dist: number
        i = IS_REP_G1 + state
        p = probs[i]!
        bound = Math.imul(range >>> 11, p)
        if ((code ^ SIGN) < (bound ^ SIGN)) {
          range = bound
          probs[i] = p + ((2048 - p) >>> 5)
          b = 0
        } else {
          range = (range - bound) | 0
          code = (code - bound) | 0
          probs[i] = p - (p >>> 5)
          b = 1
        }
        if ((range ^ SIGN) < TOP_SIGNED) {
          range <<= 8
          code = (code << 8) | input[at++]!
        }
        if (b === 0) dist = rep1
        else {
          i = IS_REP_G2 + state
          p = probs[i]!
          bound = Math.imul(range >>> 11, p)
          if ((code ^ SIGN) < (bound ^ SIGN)) {
            range = bound
            probs[i] = p + ((2048 - p) >>> 5)
            b = 0
          } else {
            range = (range - bound) | 0
            code = (code - bound) | 0
            probs[i] = p - (p >>> 5)
            b = 1
          }
          if ((range ^ SIGN) < TOP_SIGNED) {
            range <<= 8
            code = (code << 8) | input[at++]!
          }
          if (b === 0) dist = rep2
          else {
            dist = rep3
            rep3 = rep2
          }
          rep2 = rep1
        }
        rep1 = rep0
        rep0 = dist
      }
      coder = REP_LEN_CODER
      state = state < 7 ? 8 : 11
    } else {
      rep3 = rep2
      rep2 = rep1
      rep1 = rep0
      coder = LEN_CODER
      state = state < 7 ? 7 : 10
    }
    // The length: a 3-bit tree of the position state, or a second one, or an 8-bit tree.
    let len: number
    let bits: number
    i = coder
    p = probs[i]!
    bound = Math.imul(range >>> 11, p)
    if ((code ^ SIGN) < (bound ^ SIGN)) {
      range = bound
      probs[i] = p + ((2048 - p) >>> 5)
      b = 0
    } else {
      range = (range - bound) | 0
      code = (code - bound) | 0
      probs[i] = p - (p >>> 5)
      b = 1
    }
    if ((range ^ SIGN) < TOP_SIGNED) {
      range <<= 8
      code = (code << 8) | input[at++]!
    }
    if (b === 0) {
      coder += LEN_LOW_AT + (posState << 3)
      bits = 3
      len = 0
    } else {
      i = coder + LEN_CHOICE2
      p = probs[i]!
      bound = Math.imul(range >>> 11, p)
      if ((code ^ SIGN) < (bound ^ SIGN)) {
        range = bound
        probs[i] = p + ((2048 - p) >>> 5)
        b = 0
      } else {
        range = (range - bound) | 0
        code = (code - bound) | 0
        probs[i] = p - (p >>> 5)
        b = 1
      }
      if ((range ^ SIGN) < TOP_SIGNED) {
        range <<= 8
        code = (code << 8) | input[at++]!
      }
      if (b === 0) {
        coder += LEN_MID_AT + (posState << 3)
        bits = 3
        len = LEN_LOW
      } else {
        coder += LEN_HIGH_AT
        bits = 8
        len = LEN_LOW + LEN_MID
      }
    }
    m = 1
    for (let k = 0; k < bits; k++) {
      i = coder + m
      p = probs[i]!
      bound = Math.imul(range >>> 11, p)
      if ((code ^ SIGN) < (bound ^ SIGN)) {
        range = bound
        probs[i] = p + ((2048 - p) >>> 5)
        b = 0
      } else {
        range = (range - bound) | 0
        code = (code - bound) | 0
        probs[i] = p - (p >>> 5)
        b = 1
      }
      if ((range ^ SIGN) < TOP_SIGNED) {
        range <<= 8
        code = (code << 8) | input[at++]!
      }
      m = (m << 1) | b
    }
    len += m - (1 << bits)
    if (coder < REP_LEN_CODER) {
      // A new distance: a 6-bit slot, then bits from a reverse tree, or direct bits and 4 aligned ones.
      const slots = POS_SLOT + (Math.min(len, 3) << 6)
      m = 1
      for (let k = 0; k < 6; k++) {
        i = slots + m
        p = probs[i]!
        bound = Math.imul(range >>> 11, p)
        if ((code ^ SIGN) < (bound ^ SIGN)) {
          range = bound
          probs[i] = p + ((2048 - p) >>> 5)
          b = 0
        } else {
          range = (range - bound) | 0
          code = (code - bound) | 0
          probs[i] = p - (p >>> 5)
          b = 1
        }
        if ((range ^ SIGN) < TOP_SIGNED) {
          range <<= 8
          code = (code << 8) | input[at++]!
        }
        m = (m << 1) | b
      }
      const slot = m - 64
      let dist: number
      if (slot < 4) dist = slot
      else {
        const count = (slot >>> 1) - 1
        // In int32: a distance past 2^31 wraps negative, and only the end marker (-1) may.
        dist = (2 | (slot & 1)) << count
        let tree: number
        let treeBits: number
        if (slot < END_POS_MODEL) {
          tree = SPEC_POS + dist - slot
          treeBits = count
        } else {
          let direct = 0
          for (let k = count - ALIGN_BITS; k > 0; k--) {
            range = range >>> 1
            b = 0
            if ((code ^ SIGN) >= (range ^ SIGN)) {
              code = (code - range) | 0
              b = 1
            }
            direct = (direct << 1) | b
            if ((range ^ SIGN) < TOP_SIGNED) {
              range <<= 8
              code = (code << 8) | input[at++]!
            }
          }
          dist = (dist + (direct << ALIGN_BITS)) | 0
          tree = ALIGN
          treeBits = ALIGN_BITS
        }
        m = 1
        for (let k = 0; k < treeBits; k++) {
          i = tree + m
          p = probs[i]!
          bound = Math.imul(range >>> 11, p)
          if ((code ^ SIGN) < (bound ^ SIGN)) {
            range = bound
            probs[i] = p + ((2048 - p) >>> 5)
            b = 0
          } else {
            range = (range - bound) | 0
            code = (code - bound) | 0
            probs[i] = p - (p >>> 5)
            b = 1
          }
          if ((range ^ SIGN) < TOP_SIGNED) {
            range <<= 8
            code = (code << 8) | input[at++]!
          }
          m = (m << 1) | b
          dist = (dist + (b << k)) | 0
        }
      }
      if (dist === -1) {
        // The end marker: only where the output is complete.
        if (pos !== end) throw new Error(`.lzma data ends after ${pos} of ${end} bytes`)
        break
      }
      if (dist < 0) throw new Error('corrupt .lzma data')
      rep0 = dist
    }
    len += MATCH_MIN
    const from = pos - rep0 - 1
    if (from < 0 || pos + len > end) throw new Error('corrupt .lzma data')
    if (rep0 === 0) out.fill(out[from]!, pos, pos + len)
    else for (let k = 0; k < len; k++) out[pos + k] = out[from + k]!
    pos += len
  }
  // Reading past the end gives NaN, which decodes garbage: caught here.
  if (at > inEnd) throw new Error('.lzma data is truncated')
  s[0] = range
  s[1] = code
  s[2] = at
  s[3] = pos
  s[4] = state
  s[5] = rep0
  s[6] = rep1
  s[7] = rep2
  s[8] = rep3
  return pos >= end
}
