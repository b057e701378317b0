/**
 * `@pgwasm/pglite` with the engine inside the bundle: in a browser, import
 * this instead (or once, for its effect, before the first `create()`), and
 * nothing needs serving beside the script: no `assets/` folder, no
 * `assetBaseUrl`. The download is about twice the default build's
 * (README, "Serving the engine"). In Node it is the same as the package's
 * main entry: the engine is read from the package either way.
 */
import './engine/loading/embedded-engine.js'

export * from './index.js'
