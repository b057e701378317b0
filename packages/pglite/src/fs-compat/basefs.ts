/**
 * `@pgwasm/pglite/basefs`: the file-system base classes and types, as
 * `@electric-sql/pglite/basefs` exports them (see `filesystem.ts` for what
 * pgwasm does with each).
 * @packageDocumentation
 */
export { BaseFilesystem, EmscriptenBuiltinFilesystem, ERRNO_CODES } from './filesystem.js'
export type { Filesystem, FilesystemHost, FsStats, FsType } from './filesystem.js'
