/**
 * Hosts an in-memory PGlite behind a socket server on 127.0.0.1 in its own
 * process (like a real server, so clients and engine do not share an event
 * loop). Prints "READY <port>" and serves until stdin closes.
 *   socket-server <pglite-socket|ours> <port>
 */
const [impl, portArg] = process.argv.slice(2)
const port = Number(portArg)

interface SocketServer {
  start(): Promise<void>
  stop(): Promise<void>
}
type ServerCtor = new (options: { db: unknown; host: string; port: number; maxConnections: number }) => SocketServer

async function main(): Promise<SocketServer> {
  let db: unknown
  let Server: ServerCtor
  if (impl === 'ours') {
    // A variable specifier: the bundle must build even while the package has no dist yet.
    const name = '@pgwasm/pglite-socket'
    const mod = (await import(name)) as { PGliteServer?: ServerCtor; PGLiteSocketServer?: ServerCtor }
    const Ctor = mod.PGliteServer ?? mod.PGLiteSocketServer
    if (!Ctor) throw new Error('@pgwasm/pglite-socket exports no PGliteServer')
    Server = Ctor
    db = await (await import('@pgwasm/pglite')).PGlite.create()
  } else {
    const mod = await import('@electric-sql/pglite-socket')
    Server = mod.PGLiteSocketServer as unknown as ServerCtor
    db = await (await import('@electric-sql/pglite')).PGlite.create()
  }
  // Room for the 16-client runs and setup connections.
  const server = new Server({ db, host: '127.0.0.1', port, maxConnections: 64 })
  await server.start()
  return server
}

try {
  const server = await main()
  process.stdout.write(`READY ${port}\n`)
  process.stdin.resume()
  process.stdin.on('end', () => {
    void server.stop().finally(() => process.exit(0))
  })
} catch (err) {
  process.stdout.write(`ERROR ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}\n`)
  process.exit(1)
}
