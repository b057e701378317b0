/**
 * Add-ons (PGlite's extension API) on a starting instance: their `setup`
 * before the engine starts, their namespaces and `init`s once it is ready.
 */
import type { PGliteExtensionSetup } from './add-on-setup.js'
import { isContribExtension } from './contrib.js'
import type { ContribExtension } from './contrib-types.js'

/**
 * An add-on as `PGliteExtension` describes it, with the instance's type as
 * a parameter: the option types name the PGlite class, which imports this.
 */
export interface AddOn<D> {
  readonly name: string
  setup(db: D, emscriptenOpts?: Record<string, unknown>, clientOnly?: boolean): Promise<PGliteExtensionSetup>
  readonly loadOnUse?: boolean
}

/** An add-on set up, by its key in `extensions`. */
export type ReadyAddOn = readonly [key: string, setup: PGliteExtensionSetup]

/** Calls every add-on's `setup` (the instance is not started yet); its bundle, if it names one, becomes a contrib module. */
export async function setUpAddOns<D extends object>(
  db: D,
  extensions: Readonly<Record<string, AddOn<D> | ContribExtension>> | undefined,
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
