import { describe, expect, it } from 'vitest'
import { cstr, frame, int32, SYNC, bindFrame, describeFrame, executeFrame as execute, parseFrame as parse } from '@pgwasm/test-support/frontend'
import { UnnamedStatementCache, sqlMayChangeMeaning, type CachePlan } from '../src/session/unnamed-cache.js'

/** Synthetic frames for the cache's batch matching; the engine-backed behaviour is in statement-cache.test.ts. */

/** Bind with one text parameter, 7. */
const bind = (statement = '', portal = ''): Buffer => bindFrame(['7'], statement, portal)
const pgQuery = (sql: string): Buffer => Buffer.concat([parse(sql), bind(), describeFrame('P'), execute(), SYNC])

/** Plans `bytes` placed at an offset inside a larger buffer, as the session's receive buffer holds them. */
function planOf(cache: UnnamedStatementCache, bytes: Buffer): CachePlan | undefined {
  const buffer = new Uint8Array(bytes.length + 20)
  buffer.set(bytes, 7)
  return cache.plan(buffer, 7, 7 + bytes.length)
}

/** Type letters and statement names of the frames in `bytes`, checking each length field. */
function frames(bytes: Uint8Array): string[] {
  const out: string[] = []
  let at = 0
  while (at < bytes.length) {
    const length = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).readInt32BE(at + 1)
    const body = Buffer.from(bytes.subarray(at + 5, at + 1 + length))
    const type = String.fromCharCode(bytes[at]!)
    const names = body.toString('latin1').split('\0')
    out.push(type === 'B' ? `B:${names[1]}` : type === 'P' ? `P:${names[0]}` : type === 'D' ? `D:${names[0]}` : type)
    at += 1 + length
  }
  expect(at).toBe(bytes.length)
  return out
}

describe('UnnamedStatementCache.plan', () => {
  it('prepares the first Parse under its own name and binds that name', () => {
    const cache = new UnnamedStatementCache('c7', 1 << 30)
    const plan = planOf(cache, pgQuery('select $1'))!
    expect(plan.kind).toBe('create')
    expect(plan.entry.name).toBe('c7.u1')
    expect(frames(plan.message)).toEqual(['P:c7.u1', 'B:c7.u1', 'D:P', 'E', 'S'])
  })

  it('drops the Parse once the statement exists, and keeps the batch as sent for a retry', () => {
    const cache = new UnnamedStatementCache('c7', 1 << 30)
    const sent = pgQuery('select $1')
    cache.created(planOf(cache, sent)!)
    const plan = planOf(cache, sent)!
    expect(plan.kind).toBe('reuse')
    expect(frames(plan.message)).toEqual(['B:c7.u1', 'D:P', 'E', 'S'])
    expect(Buffer.from(plan.original).equals(sent)).toBe(true)
  })

  it('names the statement in a Describe of the unnamed statement', () => {
    const cache = new UnnamedStatementCache('c7', 1 << 30)
    const plan = planOf(cache, Buffer.concat([parse('select $1'), describeFrame('S'), bind(), execute(), SYNC]))!
    // A Describe shows as D:<kind><name>.
    expect(frames(plan.message)).toEqual(['P:c7.u1', 'D:Sc7.u1', 'B:c7.u1', 'E', 'S'])
  })

  it('tells apart SQL that differs only in its parameter types', () => {
    const cache = new UnnamedStatementCache('c7', 1 << 30)
    const typed = Buffer.concat([frame('P', Buffer.concat([cstr('', 'select $1'), Buffer.from([0, 1]), int32(23)])), bind(), execute(), SYNC])
    cache.created(planOf(cache, pgQuery('select $1'))!)
    expect(planOf(cache, typed)!.kind).toBe('create')
  })

  it('waits while the first Parse of a statement has not come back', () => {
    const cache = new UnnamedStatementCache('c7', 1 << 30)
    planOf(cache, pgQuery('select $1'))
    expect(planOf(cache, pgQuery('select $1'))).toBeUndefined()
  })

  it('parses again after a refused statement is evicted, under a new name', () => {
    const cache = new UnnamedStatementCache('c7', 1 << 30)
    const first = planOf(cache, pgQuery('select $1'))!
    cache.created(first)
    cache.evict(planOf(cache, pgQuery('select $1'))!)
    const again = planOf(cache, pgQuery('select $1'))!
    expect(again.kind).toBe('create')
    expect(again.entry.name).toBe('c7.u2')
  })

  it('never caches SQL whose Parse warned', () => {
    const cache = new UnnamedStatementCache('c7', 1 << 30)
    cache.refuse(planOf(cache, pgQuery('select $1'))!, true)
    expect(planOf(cache, pgQuery('select $1'))).toBeUndefined()
  })

  it.each([
    ['no Sync', Buffer.concat([parse('select 1'), bind(), execute()])],
    ['two sequences', Buffer.concat([pgQuery('select 1'), pgQuery('select 1')])],
    ['a named statement', Buffer.concat([parse('select 1', 's1'), bind('s1'), execute(), SYNC])],
    ['a named portal', Buffer.concat([parse('select 1'), bind('', 'p1'), execute('p1'), SYNC])],
    ['two Binds', Buffer.concat([parse('select 1'), bind(), execute(), bind(), execute(), SYNC])],
    ['a Flush', Buffer.concat([parse('select 1'), bind(), frame('H'), execute(), SYNC])],
    ['a Close', Buffer.concat([parse('select 1'), bind(), execute(), frame('C', Buffer.concat([Buffer.from('S'), cstr('')])), SYNC])],
    ['a Bind first', Buffer.concat([bind(), execute(), SYNC])],
    ['no Bind', Buffer.concat([parse('select 1'), describeFrame('S'), SYNC])],
    ['LISTEN', pgQuery('listen ch')],
    ['COPY', pgQuery('copy t from stdin')],
    ['DISCARD ALL', pgQuery('discard all')],
    ['DEALLOCATE', pgQuery('DEALLOCATE ALL')],
    ['a truncated frame', pgQuery('select 1').subarray(0, -1)],
    ['more than 64 KiB', pgQuery(`select '${'x'.repeat(70_000)}'`)],
  ])('leaves a batch with %s as it is', (_what, bytes) => {
    expect(planOf(new UnnamedStatementCache('c7', 1 << 30), bytes)).toBeUndefined()
  })
})

describe('sqlMayChangeMeaning', () => {
  const check = (sql: string): boolean => {
    const bytes = Buffer.from(sql)
    return sqlMayChangeMeaning(bytes, 0, bytes.length)
  }

  it('flags CREATE TABLE AS and SELECT INTO, whose tag reads SELECT', () => {
    expect(check('create temp table t as select 1')).toBe(true)
    expect(check('SELECT * INTO newt FROM t')).toBe(true)
  })

  it('flags set_config()', () => {
    expect(check(`select set_config('TimeZone', 'UTC', false)`)).toBe(true)
  })

  it('passes plain DML, and words that only contain create or into', () => {
    expect(check('select created_at, into_x from t')).toBe(false)
    expect(check('insert into t values (1)')).toBe(false)
    expect(check('merge into t using s on true when matched then do nothing')).toBe(false)
    expect(check('select 1')).toBe(false)
  })
})
