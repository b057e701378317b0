import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { tempDir } from '@pgwasm/test-support/temp-dirs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

/** Past this size the child's runtime refuses a new array, as a browser tab near its limit does. */
const LIMIT = 64 * 1024 * 1024

interface Outcome {
  readonly ok?: boolean
  readonly name?: string
  readonly code?: string
  readonly message?: string
}

interface Report {
  insert: Outcome
  ctas: Outcome
  copy: Outcome
  afterwards: { rows: number; ctasTable: string | null; added: number; answer: number }
}

/**
 * An in-memory database in a process whose runtime refuses arrays past
 * {@link LIMIT} bytes with V8's own error ("Array buffer allocation failed"),
 * the way a browser tab or an address-space limit does; files past 32 MB
 * grow on resizable buffers in Node, so those are refused too. Nothing here
 * can exhaust this machine's memory safely, so the refusal is injected at
 * the runtime's constructors; the engine and its file system are the real ones.
 */
async function runChild(dir: string): Promise<Report> {
  const script = join(dir, 'child.mjs')
  writeFileSync(
    script,
    `const LIMIT = ${LIMIT}
const refuse = () => new RangeError('Array buffer allocation failed')
class LimitedArray extends Uint8Array {
  constructor(...args) {
    if (typeof args[0] === 'number' && args[0] > LIMIT) throw refuse()
    super(...args)
  }
}
globalThis.Uint8Array = LimitedArray
const NativeBuffer = ArrayBuffer
globalThis.ArrayBuffer = new Proxy(NativeBuffer, {
  construct(target, args, newTarget) {
    if (args[1]?.maxByteLength > LIMIT) throw refuse()
    return Reflect.construct(target, args, newTarget === globalThis.ArrayBuffer ? target : newTarget)
  },
})
const { PGlite } = await import(${JSON.stringify(join(root, 'packages/pglite/dist/index.js'))})
const db = await PGlite.create()
await db.exec("create table t (id int, pad text); insert into t select g, repeat(md5(g::text), 32) from generate_series(1, 10000) g")
const attempt = (run) => run.then(() => ({ ok: true }), (e) => ({ name: e.name, code: e.code, message: e.message }))
// ~120 MB of rows: past the limit whichever way the table's file grows.
const insert = await attempt(db.exec("insert into t select g, repeat(md5(g::text), 32) from generate_series(1, 100000) g"))
const ctas = await attempt(db.exec("create table big as select g as id, repeat(md5(g::text), 32) as pad from generate_series(1, 100000) g"))
const lines = []
for (let i = 1; i <= 100000; i++) lines.push(i + '\\t' + 'y'.repeat(1000) + '\\n')
const copy = await attempt(db.query("copy t from '/dev/blob'", [], { blob: new Blob(lines) }))
const rows = (await db.query('select count(*)::int as n from t')).rows[0].n
const ctasTable = (await db.query("select to_regclass('big')::text as t")).rows[0].t
await db.query("insert into t values (-1, 'after')")
const added = (await db.query("select count(*)::int as n from t where pad = 'after'")).rows[0].n
const answer = (await db.query('select 6 * 7 as n')).rows[0].n
await db.close()
console.log(JSON.stringify({ insert, ctas, copy, afterwards: { rows, ctasTable, added, answer } }))
`,
  )
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [script], { timeout: 180_000 }, (err, out, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(out)))
  })
  return JSON.parse(stdout.trim().split('\n').pop()!) as Report
}

describe('an in-memory file the runtime cannot grow', () => {
  let report: Report

  beforeAll(async () => {
    report = await runChild(tempDir())
  }, 200_000)

  it('fails the statement with 53100 (No space left on device), as a full disk does', () => {
    for (const outcome of [report.insert, report.ctas, report.copy]) {
      expect(outcome).toMatchObject({ name: 'DatabaseError', code: '53100', message: expect.stringMatching(/could not (extend|write to) file .*No space left on device/) })
    }
  })

  it('keeps the instance and what was committed before', () => {
    expect(report.afterwards).toEqual({ rows: 10_000, ctasTable: null, added: 1, answer: 42 })
  })
})
