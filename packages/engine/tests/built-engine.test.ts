// The engine this checkout builds (`pnpm engine`), run as PostgreSQL's own
// programs under Node: initdb makes a cluster, the backend answers SQL in
// single-user mode. Without a built engine these tests skip, except under
// CI=true, where .ci/run builds it first and a missing engine fails the run.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { isCI } from '@pgwasm/test-support/required-tools'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { engineKey, findBuiltEngine, initCluster, runSingleUser } from '../src/index.js'

const engine = findBuiltEngine()
if (!engine && isCI()) {
  throw new Error(`the engine ${engineKey()} is not built; .ci/run builds it with \`pnpm engine\` before the tests`)
}

/** Single-user mode: one statement per line, results printed as `name = "value"`. */
function single(dataDir: string, sql: string) {
  return runSingleUser(engine!, dataDir, sql)
}

describe.skipIf(!engine)('the engine built from Debian sources', () => {
  let dataDir = ''

  beforeAll(() => {
    dataDir = join(mkdtempSync(join(tmpdir(), 'pgwasm-engine-')), 'data')
    const init = initCluster(engine!, dataDir)
    expect(init.stderr + init.stdout).toContain('Success')
    expect(init.status).toBe(0)
  }, 300_000)

  afterAll(() => {
    if (dataDir) rmSync(dirname(dataDir), { recursive: true, force: true })
  })

  it('has setjmp/longjmp inside the module: no invoke_* trampolines, unlike the published engine', () => {
    const imports = (file: string) => WebAssembly.Module.imports(new WebAssembly.Module(readFileSync(file))).map((entry) => entry.name)
    const ours = imports(join(engine!.dir, 'bin', 'postgres.wasm'))
    const published = imports(createRequire(import.meta.url).resolve('@electric-sql/pglite/pglite.wasm'))
    expect(published.filter((name) => name.startsWith('invoke_')).length).toBeGreaterThan(40)
    expect(ours.filter((name) => name.startsWith('invoke_'))).toEqual([])
  })

  it('made a PostgreSQL 18 cluster with initdb', () => {
    expect(readFileSync(join(dataDir, 'PG_VERSION'), 'utf8').trim()).toBe('18')
    expect(engine!.info.postgresql).toMatch(/^18\./)
  })

  it('answers SQL, and goes on after an error', () => {
    const run = single(dataDir, 'select version();\nselect 1/0;\nselect 40 + 2 as answer;\n')
    expect(run.stdout).toContain(`PostgreSQL ${engine!.info.postgresql} on wasm32-unknown-emscripten`)
    expect(run.stderr).toContain('division by zero')
    expect(run.stdout).toMatch(/answer = "42"/)
  })

  it('loads a dictionary module at run time (snowball, a side module)', () => {
    const run = single(dataDir, "select to_tsvector('english', 'the running dogs') as v;\n")
    expect(run.stderr).not.toContain('ERROR')
    expect(run.stdout).toContain(`v = "'dog':3 'run':2"`)
  })

  it('leaves no files of its own behind (LLVM profile output came with libc)', () => {
    single(dataDir, 'select 1;\n')
    expect(readdirSync(dataDir).filter((name) => name.endsWith('.profraw'))).toEqual([])
  })

  it('keeps what one run wrote for the next', () => {
    const write = single(dataDir, 'create table kept (id int primary key, note text);\ninsert into kept select g, md5(g::text) from generate_series(1, 5000) g;\n')
    expect(write.stderr).not.toContain('ERROR')
    const read = single(dataDir, 'select count(*) as n, max(id) as top from kept;\n')
    expect(read.stdout).toMatch(/n = "5000"/)
    expect(read.stdout).toMatch(/top = "5000"/)
  })
})
