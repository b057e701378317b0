// The browser build of @pgwasm/pglite (dist/browser/): ESM for
// `platform: browser`, no `node:` import left, the engine files embedded
// (gzipped, base64) and also copied to dist/browser/assets/ for `assetBaseUrl`;
// the contrib bundles embedded too, each in a chunk loaded on use.
import { build } from 'esbuild'
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { gzipSync } from 'node:zlib'

/** @param {{ root: string, dist: string, entries: string[] }} o */
export default async function buildBrowser({ root, dist, entries }) {
  const out = join(dist, 'browser')
  const work = mkdtempSync(join(tmpdir(), 'pgwasm-browser-build-'))
  try {
    const require = createRequire(join(root, 'package.json'))
    const engineDist = dirname(require.resolve('@electric-sql/pglite/pglite.wasm'))

    // The default template, made by our own initdb path in Node.
    // Beside the package, so that it resolves the package's dependencies.
    const maker = join(dist, '.make-template.mjs')
    await build({ entryPoints: [join(root, 'scripts', 'make-template.ts')], bundle: true, platform: 'node', format: 'esm', outfile: maker, packages: 'external', logLevel: 'warning' })
    const templateFile = join(work, 'template.pgwt.gz')
    const polledFile = join(work, 'pglite.polled.wasm')
    const made = execFileSync(process.execPath, [maker, templateFile, polledFile], { cwd: root, encoding: 'utf8' })
    rmSync(maker)
    const { engineVersion, arrayTypes, guardRecords, interruptPollSlot } = JSON.parse(made.trim().split('\n').pop())
    // The Node build ships the same template (engine-files.ts), so a fresh
    // install's first create() does not run initdb in the user's process;
    // and the rewritten engine binary, named for the engine version it was made from.
    const nodeTemplateDir = join(dist, 'engine')
    mkdirSync(nodeTemplateDir, { recursive: true })
    copyFileSync(polledFile, join(nodeTemplateDir, `${engineVersion}.polled.wasm`))
    copyFileSync(templateFile, join(nodeTemplateDir, 'default-template.pgwt.gz'))
    writeFileSync(join(nodeTemplateDir, 'default-template.json'), `${JSON.stringify({ engineVersion, arrayTypes, guardRecords })}\n`)

    const assetDir = join(out, 'assets')
    mkdirSync(assetDir, { recursive: true })
    const files = { 'pglite.wasm': polledFile, 'pglite.data': join(engineDist, 'pglite.data'), 'initdb.wasm': join(engineDist, 'initdb.wasm'), 'template.pgwt.gz': templateFile }
    const sizes = {}
    const gzipped = {}
    for (const [name, file] of Object.entries(files)) {
      copyFileSync(file, join(assetDir, name))
      sizes[name] = statSync(file).size
      const bytes = readFileSync(file)
      gzipped[name] = (name.endsWith('.gz') ? bytes : gzipSync(bytes, { level: 9 })).toString('base64')
    }
    writeFileSync(join(work, 'manifest.js'), `export const engineVersion = ${JSON.stringify(engineVersion)}\nexport const sizes = ${JSON.stringify(sizes)}\nexport const arrayTypes = ${JSON.stringify(arrayTypes)}\nexport const guardRecords = ${JSON.stringify(guardRecords)}\nexport const interruptPollSlot = ${JSON.stringify(interruptPollSlot)}\n`)
    // One module per use: a reopen or a snapshot restore never parses the template's text.
    const groups = { core: ['pglite.wasm', 'pglite.data'], initdb: ['initdb.wasm'], template: ['template.pgwt.gz'] }
    for (const [group, names] of Object.entries(groups)) {
      writeFileSync(join(work, `embedded-${group}.js`), `export const gzipped = {\n${names.map((k) => `  ${JSON.stringify(k)}: "${gzipped[k]}",`).join('\n')}\n}\n`)
    }
    // Each contrib bundle of the engine, in a module of its own: a chunk the
    // page loads only when an instance uses that bundle (contrib-bundles.browser.ts).
    const contribVirtual = {}
    const loaders = []
    for (const file of readdirSync(engineDist).filter((f) => f.endsWith('.tar.gz')).sort()) {
      const name = file.slice(0, -'.tar.gz'.length)
      const module = join(work, `contrib-${name}.js`)
      writeFileSync(module, `export const gzipped = "${readFileSync(join(engineDist, file)).toString('base64')}"\n`)
      contribVirtual[`pgwasm:contrib/${name}`] = module
      loaders.push(`  ${JSON.stringify(name)}: () => import(${JSON.stringify(`pgwasm:contrib/${name}`)}),`)
    }
    writeFileSync(join(work, 'contrib-bundles.js'), `export const loaders = {\n${loaders.join('\n')}\n}\n`)
    // The glue reaches for node:module only when it runs in Node; bundlers
    // would still try to resolve it, so that branch is cut out.
    for (const glue of ['pglite', 'initdb']) {
      const code = readFileSync(join(engineDist, `${glue}.js`), 'utf8')
      const nodeImport = 'await(import("node:module"))'
      if (!code.includes(nodeImport)) throw new Error(`${glue}.js: the node:module import to cut is not where it was; check the engine version`)
      writeFileSync(join(work, `${glue}-glue.js`), code.replace(nodeImport, '({createRequire(){throw new Error("the browser build of pgwasm cannot run in Node")}})'))
    }
    const virtual = {
      'pgwasm:engine-manifest': join(work, 'manifest.js'),
      'pgwasm:engine-core': join(work, 'embedded-core.js'),
      'pgwasm:engine-initdb': join(work, 'embedded-initdb.js'),
      'pgwasm:engine-template': join(work, 'embedded-template.js'),
      'pgwasm:postgres-glue': join(work, 'pglite-glue.js'),
      'pgwasm:initdb-glue': join(work, 'initdb-glue.js'),
      'pgwasm:contrib-bundles': join(work, 'contrib-bundles.js'),
      ...contribVirtual,
    }
    const nodeOnly = new Set(['./template-disk.js', '../fs/node-dir.js'])
    const browserPlugin = {
      name: 'pgwasm-browser',
      setup(b) {
        b.onResolve({ filter: /^pgwasm:/ }, (a) => ({ path: virtual[a.path] }))
        b.onResolve({ filter: /^node:/ }, (a) => ({ path: a.path, namespace: 'node-only' }))
        b.onResolve({ filter: /^\.\.?\/(template-disk|fs\/node-dir)\.js$/ }, (a) => (nodeOnly.has(a.path) ? { path: a.path, namespace: 'node-only' } : undefined))
        b.onResolve({ filter: /^\.\/engine-files\.js$/ }, (a) => ({ path: join(a.resolveDir, 'engine-files.browser.ts') }))
        b.onResolve({ filter: /^\.\/contrib-bundles\.js$/ }, (a) => ({ path: join(a.resolveDir, 'contrib-bundles.browser.ts') }))
        // Reached only behind Node checks; an empty module keeps the import graph browser-clean.
        b.onLoad({ filter: /.*/, namespace: 'node-only' }, () => ({ contents: 'export {}', loader: 'js' }))
      },
    }
    await build({
      entryPoints: Object.fromEntries(entries.map((n) => [n, join(root, 'src', `${n}.ts`)])),
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      splitting: true,
      // No maps: the embedded engine would double the package for nothing.
      sourcemap: false,
      outdir: out,
      // The engine glue's eval is Emscripten's EM_ASM machinery, kept as it is.
      logOverride: { 'direct-eval': 'silent' },
      plugins: [browserPlugin],
      inject: [join(root, 'scripts', 'buffer-shim.js')],
      logLevel: 'warning',
    })
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}
