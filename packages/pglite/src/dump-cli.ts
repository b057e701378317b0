/**
 * `pgwasm-dump <data-dir | tarball> [-o file]`: writes a plain SQL dump of a
 * pgwasm (or PGlite) database, which `psql` loads into any PostgreSQL.
 */
import { readFile, stat, writeFile } from 'node:fs/promises'
import { basename } from 'node:path'
import { PGlite } from './pglite.js'

const USAGE = `usage: pgwasm-dump <data-dir | tarball> [-o file]

Writes a plain SQL dump (schema and data) of a database to stdout or a file.
<data-dir>  a directory database (opened, so it must not be in use)
<tarball>   a dumpDataDir() file (.tar or .tar.gz), opened in memory
-o file     write to this file instead of stdout
`

interface Args {
  source: string
  output: string | undefined
}

function parseArgs(argv: readonly string[]): Args | string {
  let source: string | undefined
  let output: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '-h' || arg === '--help') return ''
    if (arg === '-o' || arg === '--output') {
      output = argv[++i]
      if (!output) return `${arg} needs a file name`
    } else if (arg.startsWith('--output=')) {
      output = arg.slice('--output='.length)
    } else if (arg.startsWith('-') && arg !== '-') {
      return `unknown option ${arg}`
    } else if (source === undefined) {
      source = arg
    } else {
      return `unexpected argument ${arg}`
    }
  }
  return source === undefined ? 'a data directory or tarball is required' : { source, output }
}

async function open(source: string): Promise<PGlite> {
  const info = await stat(source)
  if (info.isDirectory()) return PGlite.create(source)
  const bytes = await readFile(source)
  const archive = new File([bytes], basename(source))
  return PGlite.create({ loadDataDir: archive })
}

async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv)
  if (typeof args === 'string') {
    // --help asked for the usage (stdout); a bad command line gets it as an error.
    if (!args) process.stdout.write(USAGE)
    else process.stderr.write(`pgwasm-dump: ${args}\n\n${USAGE}`)
    return args ? 2 : 0
  }
  const db = await open(args.source)
  let sql: string
  try {
    sql = await db.dumpSql()
  } finally {
    await db.close()
  }
  if (args.output && args.output !== '-') await writeFile(args.output, sql)
  else await new Promise<void>((resolve, reject) => process.stdout.write(sql, (err) => (err ? reject(err) : resolve())))
  return 0
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err: unknown) => {
    process.stderr.write(`pgwasm-dump: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exitCode = 1
  },
)
