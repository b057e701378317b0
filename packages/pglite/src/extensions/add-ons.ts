/**
 * Add-ons (PGlite's extension API) on a starting instance: their `setup`
 * before the engine starts, their namespaces and `init`s once it is ready.
 */
import type { PGliteInterface } from '../interface.js'
import type { PGliteExtension, PGliteExtensionSetup } from '../options.js'
import { isContribExtension } from './contrib.js'
import type { ContribExtension } from './contrib-types.js'

/** An add-on set up, by its key in `extensions`. */
export type ReadyAddOn = readonly [key: string, setup: PGliteExtensionSetup]

/** Calls every add-on's `setup` (the instance is not started yet); its bundle, if it names one, becomes a contrib module. */
export async function setUpAddOns(
  db: PGliteInterface,
  extensions: Readonly<Record<string, PGliteExtension | ContribExtension>> | undefined,
): Promise<{ ready: ReadyAddOn[]; bundles: ContribExtension[] }> {
  const ready: ReadyAddOn[] = []
  const bundles: ContribExtension[] = []
  for (const [key, extension] of Object.entries(extensions ?? {})) {
    if (isContribExtension(extension)) continue
    if (key in db) throw new TypeError(`extension key \`${key}\` would hide a PGlite member`)
    const setup = (await extension.setup(db, {}, false)) ?? {}
    if (setup.bundlePath !== undefined) {
      bundles.push({ name: extension.name, bundle: extension.name, bundlePath: setup.bundlePath, ...(extension.loadOnUse ? { loadOnUse: true } : {}) })
    }
    ready.push([key, setup])
  }
  return { ready, bundles }
}

/** The add-ons' namespaces (`db[key]`) and `init`s, on the ready instance; their `close`s go to `closers`. Throws what an `init` threw. */
export async function attachAddOns(db: object, ready: readonly ReadyAddOn[], closers: (() => Promise<void>)[]): Promise<void> {
  for (const [key, { namespaceObj, close, init }] of ready) {
    if (namespaceObj !== undefined) Object.defineProperty(db, key, { value: namespaceObj, enumerable: true })
    if (close) closers.push(close)
    await init?.()
  }
}
