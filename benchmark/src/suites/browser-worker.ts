// Worker script of the browser suite, bundled twice like browser-page.ts.
import { PGlite } from '@pgwasm/pglite'
import { worker } from '@pgwasm/pglite/worker'

type Create = { create(): Promise<PGlite> }
void worker({ init: () => (PGlite as unknown as Create).create() })
