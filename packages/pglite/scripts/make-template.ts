// Build step of the browser bundle: writes the default initdb result as a
// gzipped tar, so a page starts Postgres without running initdb (~1.5 s).
import { writeFileSync } from 'node:fs'
import { loadAssets } from '../src/engine/assets.js'
import { getTemplate } from '../src/engine/template.js'
import { packTar } from '../src/fs/tar.js'
import { gzip } from '../src/fs/gzip.js'

const out = process.argv[2]
if (!out) throw new Error('usage: make-template <out.tar.gz>')
const assets = await loadAssets()
const tree = await getTemplate(assets)
writeFileSync(out, await gzip(packTar(tree)))
console.log(JSON.stringify({ engineVersion: assets.engineVersion }))
