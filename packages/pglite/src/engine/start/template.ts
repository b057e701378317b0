import type { EngineAssets } from '../loading/assets.js'
import { withoutDataChecksums } from '../backend/control-file.js'
import { INITDB_BASE_ARGS, runInitdb } from './initdb.js'
import { inNode } from '../node-builtin.js'
import type { DataTree } from '../files/pgdata-tree.js'
import { packTar, unpackTar } from '../files/tar.js'

/** Bump when the on-disk template format or what goes into it changes. */
const TEMPLATE_FORMAT = 2

const memory = new Map<string, Promise<DataTree>>()

export interface TemplateOptions {
  /** Extra initdb arguments; each distinct set gets its own template. */
  readonly initdbArgs?: readonly string[]
  /** Directory of the on-disk cache; `false` keeps templates in memory only. */
  readonly cacheDir?: string | false
}

/**
 * An initdb'ed cluster for this engine build and these initdb options:
 * from this process's memory, else from the disk cache, else made by initdb
 * (once, then stored in both).
 */
export function getTemplate(assets: EngineAssets, options: TemplateOptions = {}): Promise<DataTree> {
  const args = options.initdbArgs ?? []
  const id = templateKey(assets, options)
  let tree = memory.get(id)
  if (!tree) {
    tree = loadOrBuild(assets, id, args, options.cacheDir).catch((err: unknown) => {
      memory.delete(id)
      throw err
    })
    memory.set(id, tree)
  }
  return tree
}

/** Identifies a template: engine build, format and initdb arguments. */
export function templateKey(assets: Pick<EngineAssets, 'engineVersion'>, options: TemplateOptions = {}): string {
  return `${assets.engineVersion}|${TEMPLATE_FORMAT}|${[...INITDB_BASE_ARGS, ...(options.initdbArgs ?? [])].join(' ')}`
}

/**
 * The key of {@link getMemoryTemplate}'s tree (a snapshot booted from it is
 * not one booted from the template). Never `|data checksums off`: a build
 * that patched the shipped template through a view saved snapshots with
 * checksums on under that key.
 */
export function memoryTemplateKey(assets: Pick<EngineAssets, 'engineVersion'>, options: TemplateOptions = {}): string {
  return `${templateKey(assets, options)}|data_checksum_version 0`
}

/** The template as a new in-memory database starts from: data checksums off (control-file.ts). */
export async function getMemoryTemplate(assets: EngineAssets, options: TemplateOptions = {}): Promise<DataTree> {
  return withoutDataChecksums(await getTemplate(assets, options))
}

async function loadOrBuild(
  assets: EngineAssets,
  id: string,
  args: readonly string[],
  cacheDirOption: string | false | undefined,
): Promise<DataTree> {
  if (args.length === 0 && assets.bundledTemplate) return assets.bundledTemplate()
  if (cacheDirOption === false || !inNode) return runInitdb(assets, args)
  const disk = await import('./template-disk.js')
  const dir = cacheDirOption ?? (await disk.defaultCacheDir())
  const file = await disk.templatePath(dir, id)
  const stored = await disk.readVerified(file)
  if (stored) {
    try {
      return unpackTar(stored)
    } catch {
      // A whole file that is not a tar means a format bug: rebuild.
    }
  }
  const tree = await runInitdb(assets, args)
  await disk.writeAtomically(dir, file, packTar(tree)).catch(() => {
    // An unwritable cache costs speed, not correctness.
  })
  return tree
}

/** For tests: forget the in-memory templates of this process. */
export function clearTemplateMemory(): void {
  memory.clear()
  arrayTypes.clear()
}

/** One array type: element OID, array OID, element delimiter. */
export type ArrayTypeRow = readonly [elem: number, arr: number, delim: string]

/** The array types of a database's catalog; what `PGlite` builds its array parsers from. */
export const ARRAY_TYPES_SQL = `SELECT b.oid::int AS elem, a.oid::int AS arr, a.typdelim AS delim FROM pg_catalog.pg_type a
       JOIN pg_catalog.pg_type b ON b.oid = a.typelem WHERE a.typcategory = 'A' AND a.typsubscript = 'array_subscript_handler'::regproc`

const arrayTypes = new Map<string, readonly ArrayTypeRow[]>()

/**
 * The array types of a fresh database from this template, when known: a
 * database nothing ran in yet has exactly the template's catalog, and its
 * first create then skips a catalog query (~60-100 ms in a new page, where
 * the query's code is compiled on first use; ~20 ms after).
 */
export function knownArrayTypes(assets: Pick<EngineAssets, 'engineVersion' | 'bundledArrayTypes'>, options: TemplateOptions = {}): readonly ArrayTypeRow[] | undefined {
  const key = templateKey(assets, options)
  const known = arrayTypes.get(key)
  if (known || options.initdbArgs?.length) return known
  return assets.bundledArrayTypes
}

/** Records what {@link ARRAY_TYPES_SQL} returned on a fresh database from this template. */
export function rememberArrayTypes(assets: Pick<EngineAssets, 'engineVersion'>, options: TemplateOptions, rows: readonly ArrayTypeRow[]): void {
  arrayTypes.set(templateKey(assets, options), rows)
}
