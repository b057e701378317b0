/**
 * Runs add-ons' `close`s (PGlite's extension API), the last set up first,
 * while the database still answers. Each one runs whatever the others did.
 * @returns the first failure, for the caller to throw once its database is closed.
 */
export async function closeAddOns(closers: (() => Promise<void>)[]): Promise<{ error: unknown } | undefined> {
  let failure: { error: unknown } | undefined
  for (const close of closers.splice(0).reverse()) {
    try {
      await close()
    } catch (error) {
      failure ??= { error }
    }
  }
  return failure
}
