import { describe, expect, it } from 'vitest'
import { splitIfCopyFromClient } from '../src/sql/copy-from-client.js'

describe('COPY FROM STDIN detection', () => {
  it('spares queries without the word copy the split', () => {
    expect(splitIfCopyFromClient('select 1; select 2')).toBeUndefined()
    expect(splitIfCopyFromClient('copy t to stdout')).toBeUndefined()
    expect(splitIfCopyFromClient('select 1; copy t from stdin')?.length).toBe(2)
  })
})
