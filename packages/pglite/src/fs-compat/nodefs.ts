/**
 * `@pgwasm/pglite/nodefs`: `NodeFS`, a database in a host directory, as
 * `@electric-sql/pglite/nodefs` exports it. `new PGlite({ fs: new NodeFS(dir) })`
 * is `new PGlite(dir)`.
 * @packageDocumentation
 */
export { NodeFS } from './node.js'
