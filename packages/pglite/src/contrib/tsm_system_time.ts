// One module per contrib bundle, as `@electric-sql/pglite/contrib/<name>` has;
// generated from the list in ../contrib.ts (keep the two in step).
export { tsm_system_time } from '../contrib.js'
