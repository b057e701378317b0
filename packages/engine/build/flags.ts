// Every flag the engine is built with, and why. The build reads them from
// here and so does the cache key; README.md explains them to readers.

/** `configure`: a cross build for wasm32, with the features that have no wasm build here left out. */
export const CONFIGURE_ARGS = [
  // Emscripten's triple; PostgreSQL has no template for it, and its Linux
  // template (compiler flags, shared-library rules) fits best.
  '--host=wasm32-unknown-emscripten',
  '--with-template=linux',
  // Paths inside the engine's own file system, not the host's.
  '--prefix=/pgwasm',
  // wasm-ld has no -rpath and libraries are found through $libdir anyway.
  '--disable-rpath',
  // zic would have to run at build time; the host's time zone files serve the
  // programs that run under Node (a bundled copy comes with the in-process engine).
  '--with-system-tzdata=/usr/share/zoneinfo',
  '--disable-nls',
  '--disable-largefile',
  // Libraries not (yet) built to wasm here: each can come back once its
  // Debian source is compiled beside PostgreSQL.
  '--without-readline',
  '--without-icu',
  '--without-zlib',
  '--without-openssl',
  '--without-libxml',
  '--without-zstd',
  '--without-lz4',
  '--without-llvm',
  '--without-perl',
  '--without-python',
  '--without-tcl',
  '--without-pam',
  '--without-ldap',
  '--without-gssapi',
  '--without-systemd',
  '--without-libcurl',
  '--without-liburing',
  '--without-libnuma',
]

/** Compiler flags for all of PostgreSQL's C. */
export function compileFlags(workDir: string): string[] {
  return [
    '-O2',
    // setjmp/longjmp (PG_TRY, ereport's error recovery) as wasm exceptions,
    // inside the module: no call through a JavaScript invoke_* trampoline.
    '-sSUPPORT_LONGJMP=wasm',
    // Position-independent, so contrib modules load as side modules (dlopen).
    '-fPIC',
    // Source paths (in assertion and error locations) independent of where
    // the cache is, so two builds of the same pins are byte-identical.
    `-ffile-prefix-map=${workDir}=/pgwasm-build`,
  ]
}

/**
 * Added to the compile of the backend and its modules (make's COPT): the
 * interrupt checks count down to a call of the host (host/interrupt-poll.h).
 */
export function interruptPollInclude(hostDir: string): string {
  return `-include ${hostDir}/interrupt-poll.h`
}

/** Preprocessor flags. */
export const CPP_FLAGS = [
  // Emscripten has <sys/epoll.h> but not the calls: latches wait with poll().
  '-DWAIT_USE_POLL',
  // Emscripten's getpwuid is a stub that fails; host/identity.c answers instead.
  '-Dgetpwuid=pgwasm_getpwuid',
  // PostgreSQL's proc_exit() has the name of WASI's process exit, which the
  // runtime imports; exported from the backend, it took the import's place.
  '-Dproc_exit=pg_proc_exit',
]

/** Link flags every program shares. */
export const LINK_FLAGS = [
  '-sSUPPORT_LONGJMP=wasm',
  // PostgreSQL's max_stack_depth (2 MB by default) needs room below it.
  '-sSTACK_SIZE=8MB',
  // wasm-ld 22 puts the stack first and wants data to start above it.
  '-sGLOBAL_BASE=8MB',
  '-sALLOW_MEMORY_GROWTH=1',
]

/** The backend also loads contrib modules: it exports its symbols to them. */
export const BACKEND_LINK_FLAGS = ['-sMAIN_MODULE=1']

/**
 * Programs run under Node as command-line tools (initdb, and the backend it
 * starts): the host's files directly, process exit at the end, a #! line.
 */
export const NODE_TOOL_LINK_FLAGS = ['-sNODERAWFS=1', '-sEXIT_RUNTIME=1', '-sEXECUTABLE=1']

/**
 * The in-process engine: the backend linked as an ES module that a host
 * (the core, a test) loads and drives, its files in the module's own memory
 * file system, one frontend message per call (host/wire-session.c).
 */
export const IN_PROCESS_LINK_FLAGS = [
  // Exports only what is listed (IN_PROCESS_EXPORTS and what the side modules
  // import, computed by the build): the glue then names a few hundred symbols,
  // not all 12,000, and the linker drops the code nothing reaches.
  '-sMAIN_MODULE=2',
  // An ES module exporting a factory; the host calls pgwasm_start itself.
  '-sMODULARIZE=1',
  '-sEXPORT_ES6=1',
  '-sEXPORT_NAME=createPostgres',
  '-sINVOKE_RUN=0',
  // The runtime outlives main(): the session goes on after startup returns.
  '-sEXIT_RUNTIME=0',
  // The host writes the install tree and the cluster into MEMFS.
  '-sFORCE_FILESYSTEM=1',
  // The wire's read and write are host functions added to the table.
  '-sALLOW_TABLE_GROWTH=1',
  '-sEXPORTED_RUNTIME_METHODS=FS,ENV,HEAPU8,addFunction,removeFunction,UTF8ToString,stringToUTF8,lengthBytesUTF8',
  // main() is reached through pgwasm_start, not run by the runtime.
  '-Wno-unused-main',
]

/** The C the host calls (host/wire-session.c and two of PostgreSQL's own), besides what side modules import. */
export const IN_PROCESS_EXPORTS = [
  'malloc',
  'free',
  'pgwasm_set_wire',
  'pgwasm_start',
  'pgwasm_message',
  'pgwasm_flush',
  'pgwasm_exit',
  'pq_buffer_remaining_data',
  'IsTransactionBlock',
]
