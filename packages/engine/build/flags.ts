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
