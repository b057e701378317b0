// Worker script of the browser suite, bundled twice like browser-page.ts.
import { PGlite } from '@pgwasm/pglite'
import { worker } from '@pgwasm/pglite/worker'

type Create = { create(options?: object): Promise<PGlite> }
// The page's options (an idb:// dataDir for the tab rows) go to create, as each library's docs write it.
void worker({ init: (options) => (PGlite as unknown as Create).create(options) })
