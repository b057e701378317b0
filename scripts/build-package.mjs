// Builds one workspace package into dist/: ESM (+ CJS for library entries)
// with esbuild, .d.ts with tsc. Usage: node scripts/build-package.mjs <package-dir>
// The package.json field "build" lists { "entries": [...], "cjs": [...], "bin": [...] } (names under src/).
import { build } from 'esbuild'
import { execFileSync } from 'node:child_process'
import { readFileSync, readdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const root = resolve(process.argv[2] ?? '.')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const { entries = ['index'], cjs = ['index'], bin = [], browser } = pkg.build ?? {}
const dist = join(root, 'dist')
rmSync(dist, { recursive: true, force: true })

const external = [
  ...Object.keys(pkg.dependencies ?? {}),
  ...Object.keys(pkg.peerDependencies ?? {}),
].flatMap((name) => [name, `${name}/*`])
const shared = {
  bundle: true,
  platform: 'node',
  target: 'es2022',
  sourcemap: true,
  outdir: dist,
  external,
  logLevel: 'warning',
}
const entryPoints = (names) => Object.fromEntries(names.map((n) => [n, join(root, 'src', `${n}.ts`)]))

await build({ ...shared, entryPoints: entryPoints(entries), format: 'esm', splitting: true })
if (cjs.length > 0) {
  await build({
    ...shared,
    entryPoints: entryPoints(cjs),
    format: 'cjs',
    outExtension: { '.js': '.cjs' },
    // CJS has no import.meta: derive the module URL from __filename.
    define: { 'import.meta.url': '__pgwasm_import_meta_url' },
    banner: { js: "const __pgwasm_import_meta_url = require('node:url').pathToFileURL(__filename).href;" },
    // Keep import() of ESM files a real dynamic import in CJS.
    supported: { 'dynamic-import': true },
  })
}
for (const name of bin) {
  const file = join(dist, `${name}.js`)
  const code = readFileSync(file, 'utf8')
  if (!code.startsWith('#!')) writeFileSync(file, `#!/usr/bin/env node\n${code}`)
  chmodSync(file, 0o755)
}

// A package with a browser build names its script and the entries it covers.
if (browser) {
  const { default: buildBrowser } = await import(pathToFileURL(join(root, browser.script)).href)
  await buildBrowser({ root, dist, entries: browser.entries })
}

// esbuild writes a map for every output, even one that only re-exports a
// chunk (an entry such as `contrib/amcheck`): such a map maps nothing. Drop
// it and the comment naming it, so the package ships neither a useless map
// nor a comment pointing at a missing one.
for (const entry of readdirSync(dist, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith('.map')) continue
  const map = join(entry.parentPath, entry.name)
  const { sources = [] } = JSON.parse(readFileSync(map, 'utf8'))
  if (sources.length > 0) continue
  rmSync(map)
  const code = join(entry.parentPath, entry.name.slice(0, -'.map'.length))
  const comment = `//# sourceMappingURL=${entry.name}\n`
  const text = readFileSync(code, 'utf8')
  if (text.endsWith(comment)) writeFileSync(code, text.slice(0, -comment.length))
}

const require = createRequire(import.meta.url)
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', join(root, 'tsconfig.json')], { stdio: 'inherit' })
// Entry declarations beside the bundles; .d.cts is the twin require() users resolve.
// A nested entry (`contrib/amcheck`) points back up to dist/types/.
for (const name of entries.filter((n) => !bin.includes(n))) {
  const types = `${'../'.repeat(name.split('/').length - 1) || './'}types/${name}.js`
  writeFileSync(join(dist, `${name}.d.ts`), `export * from '${types}'\n`)
  if (cjs.includes(name)) writeFileSync(join(dist, `${name}.d.cts`), `export * from '${types}'\n`)
}
