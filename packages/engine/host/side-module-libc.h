/*
 * Side modules call the host C's versions of the libc functions the
 * backend's link wraps (identity.c, private-mappings.c, interrupt-poll.c),
 * so that they see the same file owner, mappings and timers. wasm-ld cannot
 * --wrap a side module's link (it crashes), so their compile renames the
 * calls instead: included before each of their files (-include). The macros
 * take arguments, so `struct stat` keeps its name; the libc prototypes they
 * rename declare the __wrap_ functions, which the backend exports.
 */
#ifndef PGWASM_SIDE_MODULE_LIBC_H
#define PGWASM_SIDE_MODULE_LIBC_H

#define getuid(...) __wrap_getuid(__VA_ARGS__)
#define geteuid(...) __wrap_geteuid(__VA_ARGS__)
#define stat(...) __wrap_stat(__VA_ARGS__)
#define lstat(...) __wrap_lstat(__VA_ARGS__)
#define fstat(...) __wrap_fstat(__VA_ARGS__)
#define fstatat(...) __wrap_fstatat(__VA_ARGS__)
#define mmap(...) __wrap_mmap(__VA_ARGS__)
#define setitimer(...) __wrap_setitimer(__VA_ARGS__)
#define poll(...) __wrap_poll(__VA_ARGS__)

#endif
