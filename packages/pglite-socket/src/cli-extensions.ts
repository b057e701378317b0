import { onUse, type PGliteExtension, type PGliteOptions } from '@pgwasm/pglite'
import * as contrib from '@pgwasm/pglite/contrib'
import type { ContribExtension } from '@pgwasm/pglite/contrib'

/** Add-ons the server offers when their package is installed: name -> package and export. */
const ADD_ONS: Readonly<Record<string, { readonly from: string; readonly exported: string }>> = {
  vector: { from: '@electric-sql/pglite-pgvector', exported: 'vector' },
}

type Extensions = NonNullable<PGliteOptions['extensions']>

/** Every contrib bundle by its `CREATE EXTENSION` name (and its export name, where they differ). */
function contribByName(): Map<string, [key: string, extension: ContribExtension]> {
  const byName = new Map<string, [string, ContribExtension]>()
  for (const [key, value] of Object.entries(contrib)) {
    if (typeof value !== 'object' || value === null || !('bundle' in value)) continue
    const extension = value as ContribExtension
    byName.set(extension.name, [key, extension])
    byName.set(key, [key, extension])
  }
  return byName
}

async function addOn(name: string): Promise<PGliteExtension | undefined> {
  const source = ADD_ONS[name]
  if (!source) return undefined
  try {
    const module = (await import(source.from)) as Record<string, unknown>
    return module[source.exported] as PGliteExtension | undefined
  } catch {
    return undefined
  }
}

/**
 * The `extensions` option for `--extensions <list>`: `all` (every contrib
 * module the engine ships, and pgvector when `@electric-sql/pglite-pgvector`
 * is installed), `none`, or names as `CREATE EXTENSION` spells them. Each is
 * installed at start and compiled when a database first loads it.
 * @throws Error naming what is unknown or not installed.
 */
export async function extensionsFor(list: string): Promise<Extensions> {
  const byName = contribByName()
  const out: Record<string, ContribExtension | PGliteExtension> = {}
  const wanted = list.trim().toLowerCase()
  if (wanted === 'none' || wanted === '') return out
  if (wanted === 'all') {
    for (const [key, extension] of new Map([...byName.values()].map(([k, e]) => [k, e]))) out[key] = onUse(extension)
    for (const name of Object.keys(ADD_ONS)) {
      const found = await addOn(name)
      if (found) out[name] = onUse(found)
    }
    return out
  }
  for (const name of list.split(',').map((n) => n.trim()).filter(Boolean)) {
    const found = byName.get(name)
    if (found) {
      out[found[0]] = onUse(found[1])
      continue
    }
    const extra = await addOn(name)
    if (extra) {
      out[name] = onUse(extra)
      continue
    }
    if (ADD_ONS[name]) throw new Error(`extension "${name}" needs the package ${ADD_ONS[name].from}: install it beside pgwasm-server`)
    const known = [...new Set([...byName.values()].map(([, e]) => e.name)), ...Object.keys(ADD_ONS)].sort().join(', ')
    throw new Error(`unknown extension "${name}"; known: ${known}`)
  }
  return out
}
