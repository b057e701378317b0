import type { EngineAssets } from '../loading/assets.js'
import type { InitdbModule, PostgresModule } from '../emscripten.js'
import { EngineError } from '../engine-error.js'
import {
  INITDB_EXE,
  PG_ROOT,
  PGDATA,
  POSTGRES_EXE,
  backendEnv,
  createMemory,
  installProcessHooks,
  instantiateWith,
  preloadedPackage,
} from '../backend/module.js'
import { readTree, type DataTree } from '../files/pgdata-tree.js'

/** Options initdb always runs with; the template cache key includes them. */
export const INITDB_BASE_ARGS: readonly string[] = [
  '--allow-group-access',
  '--encoding',
  'UTF8',
  '--locale=C.UTF-8',
  '--locale-provider=libc',
  '--auth=trust',
]

const STDIN_FILE = `${PG_ROOT}/pgstdin`
const STDOUT_FILE = `${PG_ROOT}/pgstdout`

/**
 * Runs initdb.wasm against a scratch backend module and returns the new
 * cluster as a tree. initdb "executes" postgres through system()/popen();
 * we answer by re-running the scratch backend's main from a pristine memory
 * image each time (docs/engine.md).
 */
export async function runInitdb(assets: EngineAssets, extraArgs: readonly string[] = []): Promise<DataTree> {
  // First: in the browser build it also fetches the files of pglite.data a
  // first visit leaves out (lazy-files.ts), which initdb and its scratch
  // backend read nearly all of.
  const initdbAssets = await assets.initdb()
  const scratch = await assets.postgresFactory({
    thisProgram: POSTGRES_EXE,
    arguments: [],
    noExitRuntime: true,
    wasmMemory: createMemory(128 * 1024 * 1024),
    instantiateWasm: instantiateWith<PostgresModule>(assets.pgliteModule),
    getPreloadedPackage: preloadedPackage(assets),
    print: () => {},
    printErr: () => {},
    stdin: () => null,
    preRun: [
      (mod) => {
        Object.assign(mod.ENV, backendEnv('postgres', 'template1'))
        ;(mod as unknown as { onRuntimeInitialized: () => void }).onRuntimeInitialized = () => {
          installProcessHooks(mod)
        }
      },
    ],
  })
  scratch.FS.chmod('/home/postgres/.pgpass', 0o600)
  scratch.FS.chmod(INITDB_EXE, 0o555)
  scratch.FS.chmod(POSTGRES_EXE, 0o555)

  const pristineMemory = scratch.HEAPU8.slice()
  let stderr = ''
  let pendingArgs: string[] | null = null
  let lastStatus = 0
  let readEnd = 0
  let writeEnd = 0

  const runPostgres = (command: string): number => {
    const argv = splitCommand(command)
    if (argv[0] !== POSTGRES_EXE) throw new Error(`initdb tried to run ${argv[0] ?? 'nothing'}`)
    scratch.HEAPU8.set(pristineMemory)
    return scratch.callMain(argv.slice(1))
  }

  const initdbMod = await initdbAssets.factory({
    thisProgram: INITDB_EXE,
    arguments: [],
    noExitRuntime: false,
    instantiateWasm: instantiateWith<InitdbModule>(initdbAssets.module),
    locateFile: (path, prefix) => (path.endsWith('.so') ? `${PG_ROOT}/lib/${path}` : prefix + path),
    print: () => {},
    printErr: (text) => {
      stderr += text + '\n'
    },
    stdin: () => null,
    preRun: [
      (mod) => {
        const env = backendEnv('postgres', 'template1')
        for (const key of ['PGDATA', 'HOME', 'USER', 'LOGNAME', 'ICU_DATA', 'TZ'] as const) mod.ENV[key] = env[key]!
        mod.FS.mkdirTree(PG_ROOT)
        mod.FS.mount(
          (mod as unknown as { PROXYFS: unknown }).PROXYFS,
          { root: PG_ROOT, fs: scratch.FS },
          PG_ROOT,
        )
      },
      (mod) => {
        const onInit = (): void => {
          mod._pgl_set_system_fn(mod.addFunction((cmd: number) => runPostgres(mod.UTF8ToString(cmd)), 'pi'))
          mod._pgl_set_popen_fn(
            mod.addFunction((cmd: number, modePtr: number) => {
              const mode = mod.UTF8ToString(modePtr)
              if (mode === 'r') {
                lastStatus = runPostgres(mod.UTF8ToString(cmd))
                return readEnd
              }
              // 'w': initdb writes a script first; postgres runs at pclose().
              pendingArgs = [mod.UTF8ToString(cmd)]
              return writeEnd
            }, 'ppi'),
          )
          mod._pgl_set_pclose_fn(
            mod.addFunction((stream: number) => {
              if (stream !== readEnd && stream !== writeEnd) return mod._pclose(stream)
              if (pendingArgs) {
                const [command] = pendingArgs
                pendingArgs = null
                lastStatus = runPostgres(command!)
              }
              return lastStatus
            }, 'pi'),
          )
          // The backend's stdin/stdout become files that initdb's popen ends
          // read and write.
          const onStack = (m: { stringToUTF8OnStack(s: string): number }, s: string): number => m.stringToUTF8OnStack(s)
          scratch._pgl_freopen(onStack(scratch, STDIN_FILE), onStack(scratch, 'r'), 0)
          scratch._pgl_freopen(onStack(scratch, STDOUT_FILE), onStack(scratch, 'w'), 1)
          readEnd = mod._fopen(onStack(mod, STDOUT_FILE), onStack(mod, 'r'))
          writeEnd = mod._fopen(onStack(mod, STDIN_FILE), onStack(mod, 'w'))
        }
        ;(mod as unknown as { onRuntimeInitialized: () => void }).onRuntimeInitialized = onInit
      },
    ],
  })

  let status: number
  try {
    status = initdbMod.callMain([...INITDB_BASE_ARGS, ...extraArgs])
  } catch (cause) {
    throw new EngineError('initdb crashed', { code: 'INITDB_FAILED', cause, log: stderr })
  }
  if (status !== 0 && !stderr.includes('exists but is not empty')) {
    throw new EngineError(`initdb failed with exit code ${status}: ${lastLines(stderr)}`, {
      code: 'INITDB_FAILED',
      log: stderr,
    })
  }
  const tree = readTree(scratch.FS, PGDATA)
  if (!tree.some((e) => e.path === 'PG_VERSION')) {
    throw new EngineError('initdb finished without creating PG_VERSION', { code: 'INITDB_FAILED', log: stderr })
  }
  return tree
}

function lastLines(text: string, count = 5): string {
  return text.trim().split('\n').slice(-count).join(' | ')
}

/**
 * Splits the shell command line initdb builds into argv, stopping at the
 * first shell operator (redirections such as `> /dev/null 2>&1`).
 */
export function splitCommand(command: string): string[] {
  const argv: string[] = []
  let current = ''
  let hasToken = false
  let quote: '"' | "'" | null = null
  for (let i = 0; i < command.length; i++) {
    const ch = command[i]!
    if (quote) {
      if (ch === quote) quote = null
      else if (ch === '\\' && quote === '"' && i + 1 < command.length) current += command[++i]
      else current += ch
      continue
    }
    if (ch === '"' || ch === "'") {
      quote = ch
      hasToken = true
    } else if (ch === '\\' && i + 1 < command.length) {
      current += command[++i]
      hasToken = true
    } else if (ch === ' ' || ch === '\t' || ch === '\n') {
      if (hasToken) argv.push(current)
      current = ''
      hasToken = false
    } else if (ch === '>' || ch === '<' || ch === '|' || ch === '&' || ch === ';') {
      // "2>&1": a digit right before the operator belongs to it, not to argv.
      if (hasToken && !/^\d+$/.test(current)) argv.push(current)
      return argv
    } else {
      current += ch
      hasToken = true
    }
  }
  if (hasToken) argv.push(current)
  return argv
}
