// The browser build of @pgwasm/pglite (dist/browser/): ESM for
// `platform: browser`, no `node:` import left. The engine files are assets
// in dist/browser/assets/, fetched from beside the script (or
// `assetBaseUrl`); the `embedded` entry carries them inside the bundle
// instead (gzipped, base64), the contrib bundles each in a chunk loaded on use.
import { build } from 'esbuild'
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { gunzipSync, gzipSync } from 'node:zlib'
import { dataFiles, lzma, packOf, splitDataSegments } from './browser-assets.mjs'

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
    shipStartSnapshot(dist, nodeTemplateDir, work)

    const assetDir = join(out, 'assets')
    for (const dir of ['', 'share', 'contrib']) mkdirSync(join(assetDir, dir), { recursive: true })
    // What a first visit fetches (browser-assets.mjs): the engine's code, its
    // memory image with the files every start reads, and the template; the
    // rest of pglite.data in packs, initdb and the contrib bundles on use.
    const glueText = readFileSync(join(engineDist, 'pglite.js'), 'utf8')
    const pgliteData = readFileSync(join(engineDist, 'pglite.data'))
    const files = dataFiles(glueText, pgliteData.length)
    const polled = readFileSync(polledFile)
    const { code, image, base } = splitDataSegments(polled)
    const packNames = ['boot']
    const packOfFile = files.map((f) => {
      const name = packOf(f.path)
      if (!packNames.includes(name)) packNames.push(name)
      return packNames.indexOf(name)
    })
    const packParts = packNames.map(() => [])
    files.forEach((f, i) => packParts[packOfFile[i]].push(pgliteData.subarray(f.start, f.start + f.size)))
    const packs = packParts.map((parts) => Buffer.concat(parts))
    const firstData = lzma(Buffer.concat([image, packs[0]]))
    writeFileSync(join(assetDir, 'pglite.wasm'), code)
    writeFileSync(join(assetDir, 'pglite.data'), firstData)
    const packSizes = packNames.map((name, i) => {
      if (i === 0) return [name, packs[0].length, 0]
      const packed = lzma(packs[i])
      writeFileSync(join(assetDir, 'share', `${name}.lzma`), packed)
      return [name, packs[i].length, packed.length]
    })
    const templateImage = gunzipSync(readFileSync(templateFile))
    const templatePacked = lzma(templateImage)
    writeFileSync(join(assetDir, 'template.pgwt.lzma'), templatePacked)
    copyFileSync(join(engineDist, 'initdb.wasm'), join(assetDir, 'initdb.wasm'))
    const assetSizes = {
      'pglite.wasm': code.length,
      'pglite.data': firstData.length,
      'template.pgwt.lzma': templatePacked.length,
      'initdb.wasm': statSync(join(engineDist, 'initdb.wasm')).size,
    }
    writeFileSync(
      join(work, 'manifest.js'),
      [
        `export const engineVersion = ${JSON.stringify(engineVersion)}`,
        `export const assetSizes = ${JSON.stringify(assetSizes)}`,
        `export const memoryImage = ${JSON.stringify({ base, bytes: image.length })}`,
        `export const templateBytes = ${templateImage.length}`,
        `export const dataFiles = ${JSON.stringify({ size: pgliteData.length, sizes: files.map((f) => f.size), packs: packOfFile, packSizes })}`,
        `export const arrayTypes = ${JSON.stringify(arrayTypes)}`,
        `export const guardRecords = ${JSON.stringify(guardRecords)}`,
        `export const interruptPollSlot = ${JSON.stringify(interruptPollSlot)}`,
        '',
      ].join('\n'),
    )
    // The single-file build (`@pgwasm/pglite/embedded`): the same files
    // gzipped inside the bundle, each group in a module of its own that is
    // read when first needed, so a reopen or a snapshot restore never
    // parses the template's text.
    const embedded = { 'pglite.wasm': polled, 'pglite.data': pgliteData, 'initdb.wasm': readFileSync(join(engineDist, 'initdb.wasm')), 'template.pgwt.gz': readFileSync(templateFile) }
    const groups = { core: ['pglite.wasm', 'pglite.data'], initdb: ['initdb.wasm'], template: ['template.pgwt.gz'] }
    for (const [group, names] of Object.entries(groups)) {
      const text = (name) => (name.endsWith('.gz') ? embedded[name] : gzipSync(embedded[name], { level: 9 })).toString('base64')
      writeFileSync(join(work, `embedded-${group}.js`), `export const gzipped = {\n${names.map((k) => `  ${JSON.stringify(k)}: "${text(k)}",`).join('\n')}\n}\n`)
    }
    // Each contrib bundle of the engine: an asset fetched on use, and for
    // the single-file build a module of its own, a chunk the page loads
    // only when an instance uses that bundle (contrib-bundles.browser.ts).
    const contribVirtual = {}
    const loaders = []
    for (const file of readdirSync(engineDist).filter((f) => f.endsWith('.tar.gz')).sort()) {
      const name = file.slice(0, -'.tar.gz'.length)
      copyFileSync(join(engineDist, file), join(assetDir, 'contrib', file))
      const module = join(work, `contrib-${name}.js`)
      writeFileSync(module, `export const gzipped = "${readFileSync(join(engineDist, file)).toString('base64')}"\n`)
      contribVirtual[`pgwasm:contrib/${name}`] = module
      loaders.push(`  ${JSON.stringify(name)}: () => import(${JSON.stringify(`pgwasm:contrib/${name}`)}),`)
    }
    writeFileSync(join(work, 'contrib-bundles.js'), `export const loaders = {\n${loaders.join('\n')}\n}\n`)
    // The glue reaches for node:module only when it runs in Node; bundlers
    // would still try to resolve it, so that branch is cut out. initdb's
    // glue is also an asset: a first visit does not carry it in its script.
    for (const glue of ['pglite', 'initdb']) {
      const glueCode = readFileSync(join(engineDist, `${glue}.js`), 'utf8')
      const nodeImport = 'await(import("node:module"))'
      if (!glueCode.includes(nodeImport)) throw new Error(`${glue}.js: the node:module import to cut is not where it was; check the engine version`)
      const browserGlue = glueCode.replace(nodeImport, '({createRequire(){throw new Error("the browser build of pgwasm cannot run in Node")}})')
      writeFileSync(join(work, `${glue}-glue.js`), browserGlue)
      if (glue === 'initdb') writeFileSync(join(assetDir, 'initdb.js'), browserGlue)
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
    const nodeOnly = new Set(['./template-disk.js', '../start/template-disk.js', '../fs/node-dir.js'])
    const browserPlugin = {
      name: 'pgwasm-browser',
      setup(b) {
        b.onResolve({ filter: /^pgwasm:/ }, (a) => ({ path: virtual[a.path] }))
        b.onResolve({ filter: /^node:/ }, (a) => ({ path: a.path, namespace: 'node-only' }))
        b.onResolve({ filter: /^\.\.?\/(start\/)?(template-disk|fs\/node-dir)\.js$/ }, (a) => (nodeOnly.has(a.path) ? { path: a.path, namespace: 'node-only' } : undefined))
        b.onResolve({ filter: /^\.\/engine-files\.js$/ }, (a) => ({ path: join(a.resolveDir, 'engine-files.browser.ts') }))
        b.onResolve({ filter: /^\.\/contrib-bundles\.js$/ }, (a) => ({ path: join(a.resolveDir, 'contrib-bundles.browser.ts') }))
        b.onResolve({ filter: /^\.\/engine\/loading\/embedded-engine\.js$/ }, (a) => ({ path: join(a.resolveDir, 'engine', 'loading', 'embedded-engine.browser.ts') }))
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
      // What a first visit downloads (~60 kB less gzipped). Error classes
      // carry their names as fields, so nothing reads a minified name.
      minify: true,
      outdir: out,
      // The engine glue's eval is Emscripten's EM_ASM machinery, kept as it is.
      logOverride: { 'direct-eval': 'silent' },
      plugins: [browserPlugin],
      inject: [join(root, 'scripts', 'buffer-shim.js')],
      logLevel: 'warning',
    })
    // Minifying drops comments, those that keep bundlers off the one import
    // of a URL known at run time (initdb's glue, an asset) included; put them
    // back, or webpack would try to resolve it at build time.
    const runtimeImport = /\bimport\(([A-Za-z_$][\w$]*)\)/
    const importing = readdirSync(out).filter((f) => f.endsWith('.js') && runtimeImport.test(readFileSync(join(out, f), 'utf8')))
    if (importing.length !== 1) throw new Error(`expected one chunk importing a URL at run time (initdb's glue), found ${importing.length}`)
    const file = join(out, importing[0])
    writeFileSync(file, readFileSync(file, 'utf8').replace(new RegExp(runtimeImport, 'g'), 'import(/* webpackIgnore: true */ /* @vite-ignore */ $1)'))
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

/**
 * The start-up snapshot of a default in-memory database, made by the built
 * package itself on the template and engine binary it ships, into an empty
 * cache of its own: shipped gzipped under the cache entry's name, a first
 * run after install restores it as a later run restores its cached one,
 * instead of booting Postgres (template-disk.ts `readShipped`).
 */
function shipStartSnapshot(dist, engineDir, work) {
  const cache = join(work, 'start-cache')
  const script = `const { PGlite } = await import(${JSON.stringify(pathToFileURL(join(dist, 'index.js')).href)})
const db = await PGlite.create()
await db.query('select 1')
await db.close()`
  // The saving is left to finish as the child's event loop drains.
  execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, PGWASM_CACHE_DIR: cache }, stdio: 'inherit' })
  const entries = readdirSync(cache).filter((f) => /^snapshot-[0-9a-f]+\.bin$/.test(f))
  if (entries.length !== 1) throw new Error(`the start-up snapshot run left ${entries.length} snapshots in its cache, not 1: ${readdirSync(cache).join(', ')}`)
  writeFileSync(join(engineDir, `${entries[0]}.gz`), gzipSync(readFileSync(join(cache, entries[0])), { level: 9 }))
}
