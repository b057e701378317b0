// Runs before a Node tool build of a program starts (--pre-js). The backend
// links all of Emscripten's libc so that side modules find what they need,
// and LLVM's profile runtime comes with it: at exit it wrote an empty
// default.profraw into the working directory (PGDATA, for the backend).
// Nothing is profiled, so its output goes nowhere.
if (typeof process === 'object' && process.env && process.env.LLVM_PROFILE_FILE === undefined) {
  process.env.LLVM_PROFILE_FILE = '/dev/null'
}
