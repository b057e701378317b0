// One module per contrib bundle, as `@electric-sql/pglite/contrib/<name>` has;
// generated from the list in ../contrib.ts (keep the two in step).
export { pg_overexplain } from '../contrib.js'
