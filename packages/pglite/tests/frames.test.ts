import { describe, expect, it } from 'vitest'
import { frame } from '@pgwasm/test-support/frontend'
import { concat } from './helpers.js'
import { FrameScanner, validateFrontendFrames, type FrameSink } from '../src/protocol/frames.js'
import { FRONTEND_TYPES } from '../src/engine/wire/message-codes.js'
import { ProtocolError } from '../src/errors.js'

function notification(pid: number, channel: string, payload: string): Uint8Array {
  const enc = new TextEncoder()
  const c = enc.encode(channel)
  const p = enc.encode(payload)
  const body = new Uint8Array(4 + c.length + 1 + p.length + 1)
  new DataView(body.buffer).setInt32(0, pid)
  body.set(c, 4)
  body.set(p, 4 + c.length + 1)
  return frame('A', body)
}

class Recorder implements FrameSink {
  frames: { type: string; body: string }[] = []
  onFrame(type: number, buf: Uint8Array, start: number, end: number): void {
    this.frames.push({ type: String.fromCharCode(type), body: Buffer.from(buf.subarray(start, end)).toString('hex') })
  }
}

const stream = concat([
  frame('T', 'abc'),
  frame('D', ''),
  notification(7, 'chan', 'hello, world'),
  frame('C', 'SELECT 1\u0000'),
  frame('Z', 'I'),
])

function scanInOne(bytes: Uint8Array, wants?: (t: number) => boolean): Recorder['frames'] {
  const r = new Recorder()
  new FrameScanner(r, wants).push(bytes)
  return r.frames
}

describe('FrameScanner', () => {
  it('reports every frame of a stream given in one chunk', () => {
    expect(scanInOne(stream).map((f) => f.type)).toEqual(['T', 'D', 'A', 'C', 'Z'])
  })

  it('reports the same frames when the stream is split in two at every byte offset', () => {
    const expected = scanInOne(stream)
    for (let cut = 0; cut <= stream.length; cut++) {
      const r = new Recorder()
      const scanner = new FrameScanner(r)
      scanner.push(stream.subarray(0, cut))
      scanner.push(stream.subarray(cut))
      expect(r.frames, `cut at ${cut}`).toEqual(expected)
      expect(scanner.midFrame).toBe(false)
    }
  })

  it('reports the same frames when every byte arrives alone', () => {
    const r = new Recorder()
    const scanner = new FrameScanner(r)
    for (let i = 0; i < stream.length; i++) scanner.push(stream.subarray(i, i + 1))
    expect(r.frames).toEqual(scanInOne(stream))
  })

  it('reports the same frames for every split into three pieces', () => {
    const expected = scanInOne(stream)
    for (let a = 0; a <= stream.length; a += 3) {
      for (let b = a; b <= stream.length; b += 2) {
        const r = new Recorder()
        const scanner = new FrameScanner(r)
        scanner.push(stream.subarray(0, a))
        scanner.push(stream.subarray(a, b))
        scanner.push(stream.subarray(b))
        expect(r.frames).toEqual(expected)
      }
    }
  })

  it('decodes only the wanted frames and skips the others without assembling them', () => {
    const wantsA = (t: number): boolean => t === 0x41
    const big = frame('D', new Uint8Array(100_000))
    const bytes = concat([big, notification(1, 'c', 'p'), big])
    const r = new Recorder()
    const scanner = new FrameScanner(r, wantsA)
    for (let i = 0; i < bytes.length; i += 8192) scanner.push(bytes.subarray(i, i + 8192))
    expect(r.frames.map((f) => f.type)).toEqual(['A'])
    // Skipped frames never grow the assembly buffer.
    expect(scanner.assemblyBytes).toBeLessThan(1024)
  })

  it('rejects a frame length below 4', () => {
    const bad = new Uint8Array([0x44, 0, 0, 0, 3])
    expect(() => new FrameScanner(new Recorder()).push(bad)).toThrow(ProtocolError)
  })
})

describe('validateFrontendFrames', () => {
  const query = frame('Q', 'select 1\u0000')

  it('accepts whole frames of known types', () => {
    expect(() => validateFrontendFrames(concat([query, frame('S', '')]), FRONTEND_TYPES)).not.toThrow()
  })

  it('rejects a truncated frame with code BAD_FRAME', () => {
    expect(() => validateFrontendFrames(query.subarray(0, query.length - 2), FRONTEND_TYPES)).toThrow(
      expect.objectContaining({ code: 'BAD_FRAME' }),
    )
  })

  it('rejects an unknown type byte with code UNKNOWN_MESSAGE', () => {
    expect(() => validateFrontendFrames(frame('\u0001', 'x'), FRONTEND_TYPES)).toThrow(
      expect.objectContaining({ code: 'UNKNOWN_MESSAGE' }),
    )
  })
})
