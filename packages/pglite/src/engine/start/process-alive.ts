// Apart from fs/process-identity.ts: the template cache asks this of a temporary file's writer, and engine/ imports nothing from outside itself.

/**
 * Whether a process with this pid exists (EPERM: it does, under another
 * user). A pid alone may name a later process; fs/process-identity.ts tells
 * those apart where it matters.
 */
export function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
