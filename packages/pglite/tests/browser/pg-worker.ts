// The worker script of tests/browser.test.ts: what the README tells users to write.
import { PGlite } from '@pgwasm/pglite'
import { worker } from '@pgwasm/pglite/worker'

void worker({ init: (options) => PGlite.create(options) })
