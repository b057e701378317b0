// PostgreSQL from its Debian source: unpacked, configured for wasm32, with
// the host C of ../host in place of what the wasm runtime lacks, compiled,
// and installed into a staging directory.
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { PACKAGE_DIR } from '../src/engine-key.js'
import { download } from './downloads.js'
import { BACKEND_LINK_FLAGS, CONFIGURE_ARGS, CPP_FLAGS, IN_PROCESS_EXPORTS, IN_PROCESS_LINK_FLAGS, LINK_FLAGS, NODE_TOOL_LINK_FLAGS, compileFlags, interruptPollInclude } from './flags.js'
import { sideModuleImports } from './side-module-imports.js'
import { CONTRIB_MODULES, CORE_MODULE_DIRS, unaccountedContrib } from './side-modules.js'
import type { Pins } from './pins.js'
import { capture, run, step } from './steps.js'
import type { Toolchain } from './toolchain.js'

export interface PostgresBuild {
  pins: Pins
  toolchain: Toolchain
  cacheRoot: string
  /** Scratch space for this build: source, objects, logs. */
  workDir: string
  /** make's -j. */
  jobs: number
}

/** Host C that replaces a PostgreSQL port file, by the name configure links it under. */
const PORT_REPLACEMENTS: Record<string, string> = {
  'src/backend/port/pg_shmem.c': 'one-process-shmem.c',
  'src/backend/port/pg_sema.c': 'one-process-sema.c',
}

/** Host C linked into the programs as objects. */
const LINKED_HOST_FILES = ['identity.c', 'interrupt-poll.c', 'node-processes.c', 'no-sysv-ipc.c', 'private-mappings.c']

/** libc entry points the host C wraps (identity.c, private-mappings.c, interrupt-poll.c, node-processes.c). */
const WRAPPED = ['getuid', 'geteuid', 'stat', 'lstat', 'fstat', 'fstatat', 'mmap', 'setitimer', 'poll', 'system']

/** The in-process engine runs no host commands: no node-processes.c, and its wire is host/wire-session.c. */
const IN_PROCESS_HOST_FILES = ['identity.c', 'interrupt-poll.c', 'no-sysv-ipc.c', 'private-mappings.c']
const IN_PROCESS_WRAPPED = ['getuid', 'geteuid', 'stat', 'lstat', 'fstat', 'fstatat', 'mmap', 'setitimer', 'poll', 'recv', 'send', 'getsockname']

const wrapFlag = (names: string[]) => `-Wl,${names.map((name) => `--wrap=${name}`).join(',')}`

/** Builds PostgreSQL and returns the staged install's root (bin, lib, share). */
export async function buildPostgres(build: PostgresBuild): Promise<string> {
  const { pins, toolchain, workDir, jobs } = build
  const logs = join(workDir, 'logs')
  const sourceDir = join(workDir, 'source')
  const buildDir = join(workDir, 'build')
  const hostDir = join(workDir, 'host')
  const stageDir = join(workDir, 'stage')
  mkdirSync(logs, { recursive: true })
  const env = toolchain.env
  const cflags = compileFlags(workDir)

  await step(`unpack PostgreSQL ${pins.postgresql.version}`, async () => {
    const tarball = await download(pins.postgresql, join(build.cacheRoot, 'downloads'))
    const log = join(logs, 'unpack.log')
    await run('tar', ['-xjf', tarball, '-C', workDir], { cwd: workDir, log })
    const unpacked = readdirSync(workDir).find((name) => name.startsWith('postgresql-'))
    if (!unpacked) throw new Error(`${tarball} did not unpack to a postgresql-* directory`)
    await run('mv', [unpacked, 'source'], { cwd: workDir, log })
    mkdirSync(hostDir)
    for (const name of readdirSync(join(PACKAGE_DIR, 'host'))) copyFileSync(join(PACKAGE_DIR, 'host', name), join(hostDir, name))
  })

  await step('configure (a few minutes: every check runs the compiler)', async () => {
    mkdirSync(buildDir)
    await run(
      'emconfigure',
      [
        join(sourceDir, 'configure'),
        ...CONFIGURE_ARGS,
        `CFLAGS=${cflags.join(' ')}`,
        `CPPFLAGS=${CPP_FLAGS.join(' ')}`,
        `LDFLAGS=${LINK_FLAGS.join(' ')}`,
      ],
      { cwd: buildDir, env, log: join(logs, 'configure.log') },
    )
    for (const [link, file] of Object.entries(PORT_REPLACEMENTS)) {
      const path = join(buildDir, link)
      rmSync(path, { force: true })
      symlinkSync(join(hostDir, file), path)
    }
  })

  const hostObjects = await step('compile the host C', async () => {
    const objects: string[] = []
    for (const file of LINKED_HOST_FILES) {
      const object = join(hostDir, file.replace(/\.c$/, '.o'))
      await run('emcc', [...cflags, '-c', join(hostDir, file), '-o', object], { cwd: hostDir, env, log: join(logs, 'host.log') })
      objects.push(object)
    }
    return objects
  })

  const toolLinks = [
    ...NODE_TOOL_LINK_FLAGS,
    '--pre-js',
    join(hostDir, 'node-tool-pre.js'),
    wrapFlag(WRAPPED),
    ...hostObjects,
  ]
  const make = (dir: string, args: string[], logName: string, parallel = true) =>
    run('make', [...(parallel ? [`-j${jobs}`] : []), '-C', join(buildDir, dir), ...args], { cwd: buildDir, env, log: join(logs, `${logName}.log`) })
  // Programs link libpq statically: the dynamic one would be a side module to load at run time.
  const staticLibpq = `libpq=${join(buildDir, 'src/interfaces/libpq/libpq.a')}`

  // The backend and its modules read InterruptPending through the host's
  // countdown (host/interrupt-poll.h); globals.c defines the variable, so it
  // is compiled first, without it (make then finds its object made).
  const polled = `COPT=${interruptPollInclude(hostDir)}`
  await step('compile the backend', async () => {
    // Generated headers first and alone, then the libraries the backend
    // links: made in parallel with the backend, they race.
    await make('src/backend', ['generated-headers'], 'backend', false)
    await make('src/port', ['all'], 'backend')
    await make('src/common', ['all'], 'backend')
    await make('src/backend/utils/init', ['globals.o'], 'backend', false)
    await make('src/backend', ['all', polled, `LDFLAGS_EX=${[...BACKEND_LINK_FLAGS, ...toolLinks].join(' ')}`], 'backend')
  })
  await step('compile initdb', async () => {
    await make('src/interfaces/libpq', ['all'], 'libpq')
    await make('src/bin/initdb', ['all', staticLibpq, `LDFLAGS_EX=${toolLinks.join(' ')}`], 'initdb')
  })
  const contribInSource = readdirSync(join(sourceDir, 'contrib')).filter((name) => existsSync(join(sourceDir, 'contrib', name, 'Makefile')))
  const unaccounted = unaccountedContrib(contribInSource)
  if (unaccounted.length > 0) {
    throw new Error(`contrib modules neither built nor left out with a reason (build/side-modules.ts): ${unaccounted.join(', ')}`)
  }
  const moduleDirs = [...CORE_MODULE_DIRS, ...CONTRIB_MODULES.map((name) => `contrib/${name}`)]
  await step(`compile the side modules (PL/pgSQL, dictionaries, conversions, pgoutput, ${CONTRIB_MODULES.length} of contrib)`, async () => {
    // They call the host C's libc wrappers by name (host/side-module-libc.h), as wasm-ld cannot wrap their link.
    const sideModuleFlags = `${polled} -include ${join(hostDir, 'side-module-libc.h')}`
    for (const dir of moduleDirs) await make(dir, ['all', sideModuleFlags], 'modules')
  })

  await step('install into the staging directory', async () => {
    const destdir = `DESTDIR=${stageDir}`
    await make('src/backend', ['install', destdir, `LDFLAGS_EX=${[...BACKEND_LINK_FLAGS, ...toolLinks].join(' ')}`], 'install', false)
    // The catalog's bootstrap files (its install target also wants the server headers' directories).
    for (const file of ['postgres.bki', 'system_constraints.sql']) {
      copyFileSync(join(buildDir, 'src/include/catalog', file), join(stageDir, 'pgwasm/share/postgresql', file))
    }
    await make('src/bin/initdb', ['install', destdir, staticLibpq, `LDFLAGS_EX=${toolLinks.join(' ')}`], 'install', false)
    for (const dir of moduleDirs) await make(dir, ['install', destdir], 'install', false)
    // make install copies each program's JavaScript; its .wasm goes beside it.
    copyFileSync(join(buildDir, 'src/backend/postgres.wasm'), join(stageDir, 'pgwasm/bin/postgres.wasm'))
    copyFileSync(join(buildDir, 'src/bin/initdb/initdb.wasm'), join(stageDir, 'pgwasm/bin/initdb.wasm'))
  })
  await step('link the in-process engine', async () => {
    // wire-session.c compiles tcop/postgres.c into itself, so it is built
    // in tcop's directory with tcop's flags, the source directory on the
    // include path; its object takes the place of postgres.o.
    const tcop = join(buildDir, 'src/backend/tcop')
    symlinkSync(join(hostDir, 'wire-session.c'), join(tcop, 'wire-session.c'))
    await make('src/backend/tcop', ['wire-session.o', `COPT=${interruptPollInclude(hostDir)} -I${join(sourceDir, 'src/backend/tcop')}`], 'in-process', false)
    // The backend's own link command, as its Makefile writes it, with these flags.
    const hostObjects = IN_PROCESS_HOST_FILES.map((file) => join(hostDir, file.replace(/\.c$/, '.o')))
    const flags = [...IN_PROCESS_LINK_FLAGS, wrapFlag(IN_PROCESS_WRAPPED), ...hostObjects]
    const printed = await capture(
      'make',
      ['-n', '-C', join(buildDir, 'src/backend'), 'postgres', '-W', '../../src/common/libpgcommon_srv.a', `LDFLAGS_EX=${flags.join(' ')}`],
      { cwd: buildDir, env },
    )
    const link = printed.split('\n').find((line) => / -o postgres$/.test(line.trim()))
    if (!link || !/ tcop\/postgres\.o /.test(link)) throw new Error(`no link command for the backend in make's plan:\n${printed.slice(-2000)}`)
    const output = join(stageDir, 'pgwasm/lib/postgres.mjs')
    const exports = [...IN_PROCESS_EXPORTS, ...sideModuleImports(join(stageDir, 'pgwasm/lib/postgresql'))]
    const command = link
      .trim()
      .replace(' tcop/postgres.o ', ` ${join(tcop, 'wire-session.o')} `)
      // The list below is what it exports, not every symbol (the glue would name all 12,000).
      .replace(' -Wl,--export-dynamic', '')
      .replace(/ -o postgres$/, ` -sEXPORTED_FUNCTIONS=${exports.map((name) => `_${name}`).join(',')} -o ${output}`)
    await run('sh', ['-c', command], { cwd: join(buildDir, 'src/backend'), env, log: join(logs, 'in-process.log') })
  })

  const root = join(stageDir, 'pgwasm')
  if (!existsSync(join(root, 'share/postgresql/postgres.bki'))) throw new Error(`the install in ${root} has no postgres.bki`)
  return root
}
