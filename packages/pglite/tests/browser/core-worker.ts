// The worker of tests/browser/worker-app.ts.
import { PGlite } from '@pgwasm/pglite'
import { worker } from '@pgwasm/pglite/worker'

void worker({ init: (options) => PGlite.create(options) })
