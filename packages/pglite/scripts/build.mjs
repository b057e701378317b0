// Builds dist/: ESM and CJS bundles with esbuild, .d.ts with tsc.
import { build } from 'esbuild'
import { execFileSync } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const dist = join(root, 'dist')
rmSync(dist, { recursive: true, force: true })

const entryPoints = { index: join(root, 'src/index.ts') }
const shared = {
  entryPoints,
  bundle: true,
  platform: 'neutral',
  target: 'es2022',
  sourcemap: true,
  outdir: dist,
  // Engine assets and protocol library stay external: resolved at run time.
  external: ['@electric-sql/pglite', 'pg-protocol', 'pg-protocol/*', 'node:*'],
  logLevel: 'warning',
}
await build({ ...shared, format: 'esm', splitting: true, outExtension: { '.js': '.js' } })
await build({
  ...shared,
  format: 'cjs',
  outExtension: { '.js': '.cjs' },
  // CJS has no import.meta: derive the module URL from __filename.
  define: { 'import.meta.url': '__pgwasm_import_meta_url' },
  banner: { js: "const __pgwasm_import_meta_url = require('node:url').pathToFileURL(__filename).href;" },
  // Keep import() of the ESM glue as a real dynamic import in CJS.
  supported: { 'dynamic-import': true },
})

const require = createRequire(import.meta.url)
const tsc = require.resolve('typescript/bin/tsc')
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' })
// Entry declarations beside the bundles; .d.cts is the twin require() users resolve.
writeFileSync(join(dist, 'index.d.ts'), "export * from './types/index.js'\n")
writeFileSync(join(dist, 'index.d.cts'), "export * from './types/index.js'\n")
