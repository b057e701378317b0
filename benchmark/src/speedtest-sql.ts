import { randomInt, rng } from './rng.js'

/**
 * The 16 workloads of SQLite's classic speed comparison (the set PGlite's
 * "speedtest" runs), generated from a seed instead of shipped as SQL files.
 * At scale 1 the sizes are the published ones.
 */

export interface Workload {
  name: string
  /** Each batch goes to the engine in one call (one simple-protocol Query for Postgres). */
  batches: string[]
  /** Rows it works on at this scale, for the notes. */
  size: string
}

const ONES = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen']
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety']

/** English words for 0..999,999,999, as the speed test's text column holds them. */
export function numberName(n: number): string {
  if (n < 20) return ONES[n]!
  if (n < 100) return TENS[Math.floor(n / 10)]! + (n % 10 ? ` ${ONES[n % 10]}` : '')
  if (n < 1000) return `${ONES[Math.floor(n / 100)]} hundred${n % 100 ? ` ${numberName(n % 100)}` : ''}`
  if (n < 1_000_000) return `${numberName(Math.floor(n / 1000))} thousand${n % 1000 ? ` ${numberName(n % 1000)}` : ''}`
  return `${numberName(Math.floor(n / 1_000_000))} million${n % 1_000_000 ? ` ${numberName(n % 1_000_000)}` : ''}`
}

export const WORKLOAD_NAMES = [
  '01 INSERTs, one statement each',
  '02 INSERTs in a transaction',
  '03 INSERTs into an indexed table',
  '04 SELECTs without an index',
  '05 SELECTs on a string comparison',
  '06 creating indexes',
  '07 SELECTs with an index',
  '08 UPDATEs without an index',
  '09 UPDATEs with an index',
  '10 text UPDATEs with an index',
  '11 INSERTs from a SELECT',
  '12 DELETE without an index',
  '13 DELETE with an index',
  '14 big INSERT after a big DELETE',
  '15 big DELETE, then small INSERTs',
  '16 DROP TABLE',
] as const

export function sizes(scale: number) {
  const n = (published: number) => Math.max(1, Math.round(published * scale))
  return {
    insertsNoTx: n(1000),
    insertsTx: n(25_000),
    selectsNoIndex: n(100),
    selectsLike: n(100),
    selectsIndex: n(5000),
    updatesNoIndex: n(1000),
    updatesIndex: n(25_000),
    textUpdates: n(25_000),
    deleteBelow: n(20_000),
    smallInserts: n(12_000),
  }
}

/**
 * The SQL is identical for PostgreSQL and SQLite (INTEGER, VARCHAR(100),
 * LIKE on lower-case ASCII, BEGIN/COMMIT all mean the same in both).
 */
export function generateSpeedtest(scale: number, seed = 20240601): Workload[] {
  const z = sizes(scale)
  const next = rng(seed)
  const row = (table: string, a: number, max: number) => {
    const b = randomInt(next, max)
    return `INSERT INTO ${table} VALUES(${a},${b},'${numberName(b)}');`
  }
  const tx = (body: string[]) => ['BEGIN;', ...body, 'COMMIT;'].join('\n')
  const range = (count: number, f: (i: number) => string) => Array.from({ length: count }, (_, i) => f(i))
  const names = WORKLOAD_NAMES
  return [
    {
      name: names[0],
      // Separate calls so each INSERT commits on its own, as in SQLite's autocommit test
      // (one multi-statement Query would run them all in one implicit transaction).
      batches: ['CREATE TABLE t1(a INTEGER, b INTEGER, c VARCHAR(100));', ...range(z.insertsNoTx, (i) => row('t1', i + 1, 100_000))],
      size: `${z.insertsNoTx} rows`,
    },
    {
      name: names[1],
      batches: [tx(['CREATE TABLE t2(a INTEGER, b INTEGER, c VARCHAR(100));', ...range(z.insertsTx, (i) => row('t2', i + 1, 500_000))])],
      size: `${z.insertsTx} rows`,
    },
    {
      name: names[2],
      batches: [
        tx([
          'CREATE TABLE t3(a INTEGER, b INTEGER, c VARCHAR(100));',
          'CREATE INDEX i3 ON t3(c);',
          ...range(z.insertsTx, (i) => row('t3', i + 1, 500_000)),
        ]),
      ],
      size: `${z.insertsTx} rows`,
    },
    {
      name: names[3],
      batches: [range(z.selectsNoIndex, (i) => `SELECT count(*), avg(b) FROM t2 WHERE b>=${i * 100} AND b<${i * 100 + 1000};`).join('\n')],
      size: `${z.selectsNoIndex} queries`,
    },
    {
      name: names[4],
      batches: [range(z.selectsLike, (i) => `SELECT count(*), avg(b) FROM t2 WHERE c LIKE '%${numberName(i + 1)}%';`).join('\n')],
      size: `${z.selectsLike} queries`,
    },
    { name: names[5], batches: ['CREATE INDEX i2a ON t2(a);\nCREATE INDEX i2b ON t2(b);'], size: '2 indexes' },
    {
      name: names[6],
      batches: [range(z.selectsIndex, (i) => `SELECT count(*), avg(b) FROM t2 WHERE b>=${i * 100} AND b<${i * 100 + 100};`).join('\n')],
      size: `${z.selectsIndex} queries`,
    },
    {
      name: names[7],
      batches: [tx(range(z.updatesNoIndex, (i) => `UPDATE t1 SET b=b*2 WHERE a>=${i * 10} AND a<${i * 10 + 10};`))],
      size: `${z.updatesNoIndex} statements`,
    },
    {
      name: names[8],
      batches: [tx(range(z.updatesIndex, (i) => `UPDATE t2 SET b=${randomInt(next, 500_000)} WHERE a=${i + 1};`))],
      size: `${z.updatesIndex} statements`,
    },
    {
      name: names[9],
      batches: [tx(range(z.textUpdates, (i) => `UPDATE t2 SET c='${numberName(randomInt(next, 500_000))}' WHERE a=${i + 1};`))],
      size: `${z.textUpdates} statements`,
    },
    { name: names[10], batches: [tx(['INSERT INTO t1 SELECT b,a,c FROM t2;', 'INSERT INTO t2 SELECT b,a,c FROM t1;'])], size: 't2 into t1, t1 into t2' },
    { name: names[11], batches: [`DELETE FROM t2 WHERE c LIKE '%fifty%';`], size: "c LIKE '%fifty%'" },
    { name: names[12], batches: [`DELETE FROM t2 WHERE a>10 AND a<${z.deleteBelow};`], size: `a in (10, ${z.deleteBelow})` },
    { name: names[13], batches: ['INSERT INTO t2 SELECT * FROM t1;'], size: 't1 into t2' },
    {
      name: names[14],
      batches: [tx(['DELETE FROM t1;', ...range(z.smallInserts, (i) => row('t1', i + 1, 100_000))])],
      size: `${z.smallInserts} rows`,
    },
    { name: names[15], batches: ['DROP TABLE t1;\nDROP TABLE t2;\nDROP TABLE t3;'], size: '3 tables' },
  ]
}
