/**
 * `@pgwasm/pglite/embedded` imports this for its side effect. In Node
 * there is nothing to do: the engine is always read from the package. The
 * browser build swaps in embedded-engine.browser.ts, which registers the
 * copies of the engine files the bundle carries.
 */
export {}
